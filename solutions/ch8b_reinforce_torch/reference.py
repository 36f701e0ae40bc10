"""The judge's own self-critical REINFORCE with an entropy bonus (ch8b): one example at a time over its real
positions only (the padding is cut off, never masked), gradients by autograd."""

import numpy as np
import torch


def _real(scores_row, mask_row):
    return scores_row[torch.as_tensor(np.flatnonzero(mask_row))]


def _entropy(real_scores):
    alpha = torch.softmax(real_scores, dim=0)
    return -(alpha * torch.log_softmax(real_scores, dim=0)).sum()


def _scores(scores):
    return torch.tensor(np.asarray(scores, dtype=np.float64), requires_grad=True)


def masked_entropy(scores, mask, d_entropy):
    """(entropy (N,), the gradient of sum(d_entropy * entropy) with respect to the scores)."""
    scores = _scores(scores)
    entropy = torch.stack([_entropy(_real(scores[n], mask[n])) for n in range(len(scores))])
    (grad,) = torch.autograd.grad((entropy * torch.as_tensor(d_entropy)).sum(), [scores])
    return entropy.detach().numpy(), grad.numpy()


def self_critical_surrogate(scores, mask, z, losses, entropy_weight):
    """(the surrogate, its gradient with respect to the scores)."""
    scores = _scores(scores)
    terms = []
    for n in range(len(scores)):
        real_positions = np.flatnonzero(mask[n])
        real = _real(scores[n], mask[n])
        greedy = real_positions[int(np.argmax(real.detach().numpy()))]
        advantage = float(losses[n][int(z[n])]) - float(losses[n][greedy])
        log_alpha = torch.log_softmax(real, dim=0)[int(np.flatnonzero(real_positions == int(z[n]))[0])]
        terms.append(advantage * log_alpha - entropy_weight * _entropy(real))
    surrogate = torch.stack(terms).mean()
    (grad,) = torch.autograd.grad(surrogate, [scores])
    return surrogate.detach().numpy(), grad.numpy()


def expected_gradient(scores, mask, losses, entropy_weight):
    """The exact gradient of sum_j alpha_j losses_j - entropy_weight * H(alpha) for one example (T,)."""
    scores = _scores(scores)
    real = _real(scores, mask)
    alpha = torch.softmax(real, dim=0)
    objective = (alpha * torch.as_tensor(np.asarray(losses, dtype=np.float64)[mask])).sum() - entropy_weight * _entropy(real)
    (grad,) = torch.autograd.grad(objective, [scores])
    return grad.numpy()


# The wrong answer this exercise exists to teach against (tools/check_exercise.py --adversarial): plain
# REINFORCE, the sampled loss with no baseline. A visible test must fail on it with a message that holds
# "message".
CORE_MISTAKE = {
    "what": "no self-critical baseline: the sampled loss alone weighs log alpha_z",
    "message": "the baseline is the loss of the greedy choice",
    "answers": {"self_critical_surrogate": """
        masked_scores = scores.masked_fill(~mask, float("-inf"))
        rows = torch.arange(scores.shape[0])
        log_alpha_z = torch.log_softmax(masked_scores, dim=-1)[rows, z]
        return (losses[rows, z].detach() * log_alpha_z - entropy_weight * masked_entropy(scores, mask)).mean()
    """},
}
