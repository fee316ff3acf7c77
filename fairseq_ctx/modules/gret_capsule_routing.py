"""Capsules by dynamic routing over the states of one encoder layer.

GRET (Weng et al., AAAI 2020), Section 2.1 "Intra-layer Representation
Generation", Algorithm 1 and Eq. 2-6:

    h_hat_{k|i} = W_k h_i                                   (Eq. 3)
    u_k  = squash(sum_i c_ki h_hat_{k|i})                   (Eq. 2, 4)
    c    = softmax(B)                                       (Eq. 5)
    B   <- B + h_hat . u      (B starts at zero)            (Eq. 6, as Sabour et al.)

Choices where the paper is ambiguous (see also ``docs/ambiguities.md``):

* **Per-capsule transform.** Eq. 3 has one W_k per capsule. A full d x d
  matrix per capsule (32 x 0.26M = 8.4M per layer with Base dimensions) cannot
  fit the paper's +6.4M for the whole model, and a single shared W makes every
  capsule identical (with B initialised to zero, all capsules receive the same
  coupling, the same update, and the same gradient, forever). We factor
  ``W_k = diag(v_k) W``: a shared ``W`` (d x d, no bias) and a per-capsule
  scale ``v_k`` (K x d, randomly initialised so capsules differ from the first
  update). This costs d^2 + K d parameters per layer and never materialises
  the K x T x d prediction tensor: ``sum_i c_ki (v_k * W h_i) = v_k * (c W H)_k``
  and ``(v_k * W h_i) . u_k = (W h_i) . (v_k * u_k)``, so routing is two
  batched matrix products per iteration, vectorised over batch, positions and
  capsules.
* **Agreement (Eq. 6).** Eq. 6 (``B = B + U^T H``) and Algorithm 1 (line
  14, ``b_ki <- b_ki + h_i . u_k``) add the agreement of a capsule with the
  raw state h_i; Eq. 2-3 build u_k from the predictions h_hat_{k|i} = W_k h_i,
  and Algorithm 1 (line 10) drops W_k altogether, so the paper is not one
  algorithm read literally. Here the logit grows by h_hat_{k|i} . u_k, the
  agreement of Sabour et al. (2017), the dynamic routing among the paper's
  references (its footnote on the capsule network's details names no
  source in our copy): u_k is a sum of predictions, so it lives where they do
  (the space W_k maps to), and its dot product with h_i would compare
  coordinates of two different bases. Not a flag: the literal reading gives
  other couplings, and nothing in the paper measures the difference.
* **Direction of the softmax (Eq. 5).** The paper's text takes the softmax of
  each row b_k of the K x I matrix B (over input positions); dynamic routing
  as in Sabour et al. (2017), which the paper cites and which
  docs/ambiguities.md assumes, takes it over capsules for each position. Default:
  ``"capsules"`` (Sabour); ``"positions"`` follows the literal Eq. 5.
* **Gradient through the routing.** The paper does not say whether gradients
  flow through the routing iterations. Here the iterations that only update
  the logits B run without gradient (the coupling coefficients are constants
  to back-propagation, as in widely used dynamic-routing implementations,
  e.g. the stop-gradient of the intermediate predictions in CapsNet
  re-implementations); W and v_k are trained through the final weighted sum
  of Eq. 2. This removes most of the routing's backward cost (training-speed
  goal: >= 0.85x of the plain Transformer). The first coupling over capsules
  is uniform (B = 0), so its weighted sum is a plain sum over positions.
* **Padding.** Predictions at padded positions are zeroed, so they add
  nothing to any capsule and their routing logits stay zero; with the softmax
  over positions their logits are also masked, so they take no coupling mass
  away from real words. (Masking logits alone is not enough with the softmax
  over capsules: each padded position would still spread a weight of 1 across
  the capsules.)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

# the choices of --gret-routing-softmax (written once, torch-free)
from fairseq_ctx.model_options import GRET_ROUTING_SOFTMAX_CHOICES as ROUTING_SOFTMAX_CHOICES


def squash(t, dim: int = -1, eps: float = 1e-9):
    """Eq. 4: ``|t|^2 / (1 + |t|^2) * t / |t|``, written as ``t |t| / (1 + |t|^2)``
    so that a zero vector (an all-padding input) maps to zero without a
    division by zero; ``eps`` keeps the gradient of the norm finite there.

    Computed in float32 and returned in ``t``'s dtype: pre-squash norms reach
    the hundreds and thousands (sums over positions), and any norm above 256
    squares past float16's maximum (65504), giving inf / inf = NaN; an eps of
    1e-9 also underflows to zero in float16. The result has norm < 1, so the
    cast back is safe. A float32 input takes exactly the former path."""
    t32 = t.float()
    sq_norm = (t32 * t32).sum(dim=dim, keepdim=True)
    return (t32 * (torch.sqrt(sq_norm + eps) / (1.0 + sq_norm))).to(t.dtype)


class CapsuleRouting(nn.Module):
    """K capsules of dimension d extracted from a sequence of d-dim states.

    Args:
        embed_dim: d, the dimension of the states and of each capsule.
        num_capsules: K (``--gret-capsules``).
        iterations: routing iterations r (``--gret-routing-iters``).
        softmax_over: ``"capsules"`` or ``"positions"`` (see module docstring).

    Parameters: ``proj.weight`` (d x d, the shared W of Eq. 3) and
    ``capsule_scale`` (K x d, the per-capsule v_k).
    """

    def __init__(self, embed_dim: int, num_capsules: int = 32, iterations: int = 3,
                 softmax_over: str = "capsules"):
        super().__init__()
        if num_capsules < 1:
            raise ValueError(f"--gret-capsules must be >= 1, got {num_capsules}")
        if iterations < 1:
            raise ValueError(f"--gret-routing-iters must be >= 1, got {iterations}")
        if softmax_over not in ROUTING_SOFTMAX_CHOICES:
            raise ValueError(
                f"--gret-routing-softmax must be one of {ROUTING_SOFTMAX_CHOICES}, got {softmax_over!r}"
            )
        self.embed_dim = embed_dim
        self.num_capsules = num_capsules
        self.iterations = iterations
        self.softmax_over = softmax_over
        self.proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.capsule_scale = nn.Parameter(torch.empty(num_capsules, embed_dim))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.xavier_uniform_(self.proj.weight)
        # Centred on 1 so that every capsule starts as a perturbed copy of the
        # shared transform; the spread is what makes the capsules differ.
        nn.init.normal_(self.capsule_scale, mean=1.0, std=0.5)

    def _coupling(self, logits, logit_mask):
        """Eq. 5: c = softmax(B), B x K x T."""
        if self.softmax_over == "capsules":
            return F.softmax(logits, dim=1)
        if logit_mask is not None:
            # finite minimum rather than -inf: an all-padding row then gives
            # zero capsules instead of NaN
            logits = logits.masked_fill(logit_mask, torch.finfo(logits.dtype).min)
        return F.softmax(logits, dim=2)

    def _weighted_sum(self, coupling, pred, iteration: int):
        """sum_i c_ki W h_i: B x K x d. The first coupling over capsules is
        uniform (B starts at zero), so it is the plain sum over positions / K."""
        if iteration == 0 and self.softmax_over == "capsules":
            return (pred.sum(dim=1, keepdim=True) / self.num_capsules).expand(-1, self.num_capsules, -1)
        return torch.bmm(coupling, pred)

    def forward(self, states, padding_mask=None, return_coupling: bool = False):
        """
        Args:
            states: B x T x d layer states.
            padding_mask: B x T, True at padded positions (or None).
            return_coupling: also return the last coupling coefficients.

        Returns:
            capsules U: B x K x d (each of norm < 1, by the squash), and with
            ``return_coupling`` the coupling coefficients c: B x K x T used
            for the final capsules. With the softmax over capsules a padded
            position still has 1/K for each capsule there (its prediction is
            zero, so it adds nothing): read c at real positions only.
        """
        bsz, seq_len, _ = states.shape
        # The d x d projection runs in the model's dtype; the routing after it
        # (sums over up to T positions, dot products with them, Eq. 2-6) runs
        # in float32, as fairseq keeps softmax and layer-norm statistics: the
        # pre-squash sums grow with T and pass float16's range (see squash).
        # A float32 model takes exactly the former path.
        pred = self.proj(states).float()  # B x T x d, shared part of W_k h_i
        if padding_mask is not None:
            pred = pred.masked_fill(padding_mask.unsqueeze(-1), 0.0)
            # the softmax over positions must not give padded positions any mass
            logit_mask = padding_mask.unsqueeze(1) if self.softmax_over == "positions" else None
        else:
            logit_mask = None
        scale = self.capsule_scale.float().unsqueeze(0)  # 1 x K x d
        logits = pred.new_zeros(bsz, self.num_capsules, seq_len)  # B of Eq. 5-6: B x K x T
        # Routing iterations only decide the coupling coefficients; as in
        # common dynamic-routing implementations they run without gradient,
        # and the gradient flows through the final weighted sum (Eq. 2).
        with torch.no_grad():
            pred_ng, scale_ng = pred.detach(), scale.detach()
            pred_t = pred_ng.transpose(1, 2)  # B x d x T
            for it in range(self.iterations - 1):
                coupling = self._coupling(logits, logit_mask)
                capsules = squash(self._weighted_sum(coupling, pred_ng, it) * scale_ng)
                logits = logits + torch.bmm(capsules * scale_ng, pred_t)  # Eq. 6, B x K x T
        coupling = self._coupling(logits, logit_mask)
        capsules = squash(self._weighted_sum(coupling, pred, self.iterations - 1) * scale)  # Eq. 2, B x K x d
        capsules = capsules.to(states.dtype)  # norms < 1 after the squash
        if return_coupling:
            return capsules, coupling.to(states.dtype)
        return capsules
