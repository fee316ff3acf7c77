"""Attentive pooling of capsules into one global vector.

GRET (Weng et al., AAAI 2020), Eq. 7-9:

    s_hat = FFN(1/K sum_k u_k)                              (Eq. 9)
    a_k   = exp(s_hat . u_k) / sum_t exp(s_hat . u_t)       (Eq. 8)
    s     = FFN(sum_k a_k u_k)                              (Eq. 7)

The paper does not give the FFNs' shape. A Transformer-sized FFN (d -> 4d ->
d, 2.1M parameters with Base dimensions) in each of 6 layers would exceed the
paper's +6.4M for the whole model, so each FFN here is one d x d linear map
with a tanh (0.26M each): bounded and signed like the GRU state it feeds
(Eq. 10) and like a query for Eq. 8.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class AttentivePooling(nn.Module):
    """Pool K capsules (B x K x d) into one vector (B x d), Eq. 7-9."""

    def __init__(self, embed_dim: int):
        super().__init__()
        self.query_ffn = nn.Linear(embed_dim, embed_dim)  # FFN of Eq. 9
        self.out_ffn = nn.Linear(embed_dim, embed_dim)  # FFN of Eq. 7
        for lin in (self.query_ffn, self.out_ffn):
            nn.init.xavier_uniform_(lin.weight)
            nn.init.zeros_(lin.bias)

    def forward(self, capsules, return_weights: bool = False):
        """capsules: B x K x d. Returns s: B x d (and a: B x K if asked)."""
        query = torch.tanh(self.query_ffn(capsules.mean(dim=1)))  # B x d, Eq. 9
        scores = torch.bmm(capsules, query.unsqueeze(-1)).squeeze(-1)  # B x K
        weights = F.softmax(scores, dim=-1)  # Eq. 8
        pooled = torch.bmm(weights.unsqueeze(1), capsules).squeeze(1)  # B x d
        out = torch.tanh(self.out_ffn(pooled))  # Eq. 7
        if return_weights:
            return out, weights
        return out
