"""Optimizers and gradient clipping. They update the parameter arrays in place."""

from __future__ import annotations

import numpy as np

from .base import Layer

__all__ = ["SGD", "Adam", "clip_grad_norm"]


def clip_grad_norm(grads, max_norm: float) -> float:
    """Scale every gradient in place so that their joint L2 norm is at most ``max_norm``.

    Returns the norm before clipping (useful to log and to plot).
    """
    grads = list(grads)
    total = float(np.sqrt(sum(float(np.vdot(g, g)) for g in grads)))
    if max_norm is not None and total > max_norm:
        scale = max_norm / (total + 1e-6)
        for g in grads:
            g *= scale
    return total


class _Optimizer:
    def __init__(self, model: Layer) -> None:
        named = list(model.named_parameters())
        if not named:
            raise ValueError("optimizer: the model has no parameters")
        self.names = [name for name, _, _ in named]
        self.params = [param for _, param, _ in named]
        self.grads = [grad for _, _, grad in named]

    def step(self) -> None:
        raise NotImplementedError


class SGD(_Optimizer):
    """``theta <- theta - lr * grad``."""

    def __init__(self, model: Layer, lr: float = 0.1) -> None:
        super().__init__(model)
        self.lr = lr

    def step(self) -> None:
        for param, grad in zip(self.params, self.grads):
            param -= self.lr * grad


class Adam(_Optimizer):
    """Adam (Kingma & Ba 2015), with bias correction folded into the step size."""

    def __init__(self, model: Layer, lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> None:
        super().__init__(model)
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.t = 0
        self.m = [np.zeros_like(p) for p in self.params]
        self.v = [np.zeros_like(p) for p in self.params]

    def step(self) -> None:
        self.t += 1
        b1, b2 = self.beta1, self.beta2
        lr_t = self.lr * np.sqrt(1 - b2 ** self.t) / (1 - b1 ** self.t)
        for param, grad, m, v in zip(self.params, self.grads, self.m, self.v):
            m *= b1
            m += (1 - b1) * grad
            v *= b2
            v += (1 - b2) * grad * grad
            param -= lr_t * m / (np.sqrt(v) + self.eps)
