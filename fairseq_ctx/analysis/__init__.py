"""Analysis scripts for trained fairseq_ctx models (gates, attention divergence, context attention)."""
