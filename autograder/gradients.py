"""Gradients of a student's torch code, taken in the sandbox with what the runner held before any
student line ran. (Copied into the sandbox beside ``runner.py``; it imports nothing of the course.)

For a torch exercise the judge asks for vector-Jacobian products: ``d sum(dout * f(inputs)) / d
input``, where ``f`` is the student's function. Only the sandbox can take them (the graph lives
where the student's code ran), so a notebook could try to answer for autograd: replace the course's
``checks.vjp``, patch torch's engine, hook a tensor to swap its gradient, or compute the forward pass
in NumPy and forge the gradients in a custom ``autograd.Function``. ``Autograd`` is made when the
runner starts, before any notebook runs, and for each request:

- calls the student's function with grad mode on, and refuses when the notebook left a state that
  changes what autograd computes (inference mode, torch function or dispatch modes, saved-tensor
  hooks) or changed torch's autograd itself (``Autograd.changed``: every name of torch's autograd
  modules, ``torch.Tensor`` and the builtins, against what they were at the start);
- walks the output's graph itself and applies each node's own derivative (``node(*grads)``, the
  C++ backward formula), in topological order, summing and reducing the gradients as torch's engine
  does: the engine is never called, so no hook of any kind (on a tensor, a node, a leaf) runs;
- refuses a graph with a node written in Python (a custom ``autograd.Function``: its backward would
  be the notebook's word), an output that is not a tensor, and outputs of which none is computed
  from the inputs (a forward pass in NumPy has no graph to differentiate).

It answers what ``checks.vjp`` answers: the output with its tensors detached, and the gradient of
every input tensor that requires one (keyed by the argument's name or position) and of every
parameter of a ``torch.nn`` module argument (``"gru.weight_ih_l0"``), as float64 arrays.
"""

from __future__ import annotations

import builtins
import types


class Refused(Exception):
    """A gradient this module will not take; the message says why, in the student's terms."""


class Autograd:
    """torch's autograd as the runner found it at its start."""

    def __init__(self, torch, numpy) -> None:
        import torch.autograd.function
        import torch.autograd.graph
        import torch.autograd.variable

        self.torch, self.numpy = torch, numpy
        self.Tensor, self.Parameter, self.Module = torch.Tensor, torch.nn.Parameter, torch.nn.Module
        self.named_parameters = torch.nn.Module.named_parameters
        self.custom_node = torch.autograd.function.BackwardCFunction
        self.enable_grad, self.no_grad = torch.enable_grad, torch.no_grad
        self.as_tensor, self.zeros_like, self.is_inference = torch.as_tensor, torch.zeros_like, torch.is_inference_mode_enabled
        self.function_modes = getattr(torch._C, "_len_torch_function_stack", lambda: 0)
        self.dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", lambda: 0)
        top = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)
        self.saved_hooks = (lambda: top(True)) if top is not None else (lambda: None)
        self.isinstance, self.type, self.len, self.id = builtins.isinstance, builtins.type, builtins.len, builtins.id
        self.spaces = {"torch": vars(torch), "torch.autograd": vars(torch.autograd),
                       "torch.autograd.graph": vars(torch.autograd.graph),
                       "torch.autograd.function": vars(torch.autograd.function),
                       "torch.autograd.variable.Variable": vars(torch.autograd.variable.Variable),
                       "torch.Tensor": vars(torch.Tensor), "torch._tensor": vars(torch._tensor),
                       "builtins": vars(builtins)}
        self.record = {name: dict(space) for name, space in self.spaces.items()}

    def changed(self) -> str | None:
        """The first name of torch's autograd (or a builtin) that is not what it was at the start;
        None when none is. A submodule imported since is no change."""
        for name, space in self.spaces.items():
            was = self.record[name]
            for key, value in list(space.items()):
                before = was.get(key, was)
                if before is value:
                    continue
                if before is was and name != "builtins" and isinstance(value, types.ModuleType) \
                        and value.__name__.startswith("torch."):
                    continue
                if name == "builtins" and (before is was or key.startswith("_")):
                    continue  # a new builtin shadows nothing; IPython sets ``_`` and its own while it runs a cell
                return f"{name}.{key}"
            missing = [key for key in was.keys() - space.keys() if not (name == "builtins" and key.startswith("_"))]
            if missing:
                return f"{name}.{sorted(missing)[0]}"
        return None

    def _refuse_state(self) -> None:
        what = self.changed()
        if what is not None:
            raise Refused(f"your notebook changed torch's autograd ({what}): its gradients cannot be taken")
        if self.is_inference():
            raise Refused("your notebook left torch's inference mode on: its gradients cannot be taken")
        if self.function_modes() or self.dispatch_modes():
            raise Refused("your notebook left a torch function or dispatch mode on: its gradients cannot be taken")
        if self.saved_hooks() is not None:
            raise Refused("your notebook left saved-tensor hooks on: its gradients cannot be taken")

    def _leaves(self, value, path: str, found: list) -> None:
        if self.isinstance(value, self.Module):
            for name, parameter in self.named_parameters(value):
                if parameter.requires_grad:
                    found.append((f"{path}.{name}", parameter))
        elif self.isinstance(value, self.Tensor):
            if value.requires_grad:
                found.append((path, value))
        elif self.isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                self._leaves(item, f"{path}[{index}]", found)
        elif self.isinstance(value, dict):
            for key, item in value.items():
                self._leaves(item, f"{path}[{key!r}]", found)

    def vjp(self, fn, dout, args: list, kwargs: dict):
        """``checks.vjp(fn, dout, *args, **kwargs)``, taken as the module docstring says."""
        leaves: list = []
        for index, value in enumerate(args):
            self._leaves(value, str(index), leaves)
        for key, value in kwargs.items():
            self._leaves(value, key, leaves)
        if not leaves:
            raise ValueError("vjp: no argument requires a gradient (make inputs with tensor(..., requires_grad=True))")
        self._refuse_state()
        with self.enable_grad():
            output = fn(*args, **kwargs)
        self._refuse_state()
        outputs = list(output) if self.isinstance(output, (tuple, list)) else [output]
        douts = list(dout) if self.isinstance(dout, (tuple, list)) else [dout]
        if self.len(douts) != self.len(outputs):
            raise AssertionError(f"the function returned {len(outputs)} output(s), the test has {len(douts)} "
                                 "upstream gradient(s)")
        roots = []
        for index, (out, d) in enumerate(zip(outputs, douts)):
            if d is None:
                continue
            if self.type(out) not in (self.Tensor, self.Parameter):
                raise AssertionError(f"output {index}: expected a torch tensor, got {type(out).__name__}")
            if out.requires_grad:
                upstream = self.as_tensor(self.numpy.asarray(d), dtype=out.dtype, device=out.device)
                roots.append((out, upstream.expand(out.shape) if upstream.dim() == 0 else upstream))
        grads = self._backward(roots, [leaf for _, leaf in leaves])
        result = {}
        for (path, leaf), grad in zip(leaves, grads):
            value = self.zeros_like(leaf) if grad is None else grad
            result[path] = value.detach().cpu().double().numpy()

        def detached(value):
            if self.isinstance(value, self.Tensor):
                return value.detach()
            if self.isinstance(value, (tuple, list)):
                return type(value)(detached(item) for item in value)
            return value

        return detached(output), result

    def _backward(self, roots: list, leaves: list) -> list:
        """The gradients of ``leaves`` from ``roots`` (output, upstream gradient): torch's backward
        pass, node by node, without its engine (so without hooks)."""
        by_leaf = {self.id(leaf): i for i, leaf in enumerate(leaves)}
        found = [None] * self.len(leaves)
        pending: dict = {}      # node -> {input number: summed gradient}
        edges: dict = {}        # node -> [(next node, its input number)]
        reached_leaf = False
        stack = []
        for out, upstream in roots:
            if out.grad_fn is None:  # a leaf itself
                index = by_leaf.get(self.id(out))
                if index is not None:
                    found[index] = upstream if found[index] is None else found[index] + upstream
                    reached_leaf = True
                continue
            self._send(pending, out.grad_fn, out.output_nr, upstream)
            stack.append(out.grad_fn)
        # The graph: every node the roots reach, and how many edges lead into each.
        incoming: dict = {}
        seen = set(stack)
        order = list(stack)
        while stack:
            node = stack.pop()
            if self.isinstance(node, self.custom_node):
                raise Refused(f"your function's graph has a node written in Python ({type(node).__name__}, a custom "
                              "autograd.Function): its backward pass would be your own word, not torch's; "
                              "write the function with torch operations")
            edges[node] = [(nxt, nr) for nxt, nr in node.next_functions if nxt is not None]
            for nxt, _ in edges[node]:
                incoming[nxt] = incoming.get(nxt, 0) + 1
                if nxt not in seen:
                    seen.add(nxt)
                    order.append(nxt)
                    stack.append(nxt)
        # Which nodes lead to one of the leaves: only those are worth applying.
        ordered = self._topological(order, edges, incoming)
        useful = set()
        for node in reversed(ordered):
            leaf = getattr(node, "variable", None) if not edges[node] else None
            if (leaf is not None and self.id(leaf) in by_leaf) or any(nxt in useful for nxt, _ in edges[node]):
                useful.add(node)
        if not useful and not reached_leaf:
            raise Refused("none of your function's outputs is computed from its inputs with torch operations: "
                          "there is no gradient to take (write the function with torch operations)")
        with self.no_grad():
            for node in ordered:
                if node not in useful:
                    continue
                given = pending.pop(node, {})
                if not edges[node] and getattr(node, "variable", None) is not None:   # AccumulateGrad: a leaf
                    grad = given.get(0)
                    index = by_leaf.get(self.id(node.variable))
                    if grad is not None and index is not None:
                        found[index] = grad if found[index] is None else found[index] + grad
                    continue
                metadata = getattr(node, "_input_metadata", None)
                count = self.len(metadata) if metadata is not None else (max(given) + 1 if given else 1)
                inputs = [given.get(i) for i in range(count)]
                if all(grad is None for grad in inputs):
                    continue
                outgoing = node(*inputs)
                outgoing = outgoing if self.isinstance(outgoing, tuple) else (outgoing,)
                for (nxt, nr), grad in zip(node.next_functions, outgoing):
                    if nxt is None or grad is None or nxt not in useful:
                        continue
                    self._send(pending, nxt, nr, grad)
        return found

    def _send(self, pending: dict, node, number: int, grad) -> None:
        """A gradient for input ``number`` of ``node``: fitted to what the node expects (as the
        engine's ``validate_outputs`` does: a broadcast input's gradient summed back to its shape,
        cast to its dtype), then summed with what reached that input before."""
        metadata = getattr(node, "_input_metadata", None)
        if metadata is not None and number < self.len(metadata):
            grad = self._fit(grad, metadata[number].shape, metadata[number].dtype)
        elif getattr(node, "variable", None) is not None:
            grad = self._fit(grad, node.variable.shape, node.variable.dtype)
        slot = pending.setdefault(node, {})
        slot[number] = grad if number not in slot else slot[number] + grad

    def _topological(self, nodes: list, edges: dict, incoming: dict) -> list:
        """``nodes`` in an order where every node comes before the nodes its edges lead to."""
        left = dict(incoming)
        ready = [node for node in nodes if left.get(node, 0) == 0]
        ordered = []
        while ready:
            node = ready.pop()
            ordered.append(node)
            for nxt, _ in edges[node]:
                left[nxt] -= 1
                if left[nxt] == 0:
                    ready.append(nxt)
        return ordered

    def _fit(self, grad, shape, dtype):
        """A gradient reduced to the shape and cast to the dtype its node expects (as the engine's
        ``validate_outputs`` does for broadcasting)."""
        shape = tuple(shape)
        if tuple(grad.shape) != shape:
            extra = grad.dim() - self.len(shape)
            if extra < 0:
                raise Refused(f"a gradient of shape {tuple(grad.shape)} does not fit {shape}")
            if extra:
                grad = grad.sum(dim=tuple(range(extra)))
            dims = tuple(i for i, size in enumerate(shape) if size == 1 and grad.shape[i] != 1)
            if dims:
                grad = grad.sum(dim=dims, keepdim=True)
            if tuple(grad.shape) != shape:
                raise Refused(f"a gradient of shape {tuple(grad.shape)} does not fit {shape}")
        return grad if grad.dtype == dtype else grad.to(dtype)
