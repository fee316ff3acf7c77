"""The converged study: every architecture trained on the Bible corpus until
its validation loss stops improving, side by side with the baseline, then
decoded, scored and probed for context use.  ``python3 -m fairseq_ctx.study``;
see ``docs/study.md``."""
