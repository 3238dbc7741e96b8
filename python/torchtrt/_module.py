"""``torchtrt.CompiledModule``: an engine as a ``torch.nn.Module``."""

from __future__ import annotations

import torch

from ._engine import Engine
from ._torchtrt import Error


class CompiledModule(torch.nn.Module):
    """A ``torch.nn.Module`` whose ``forward`` runs ``engine``: it takes the arguments the
    original module took (flattened as ``torch.export`` flattened them, when the module was
    compiled in this process) and returns its output structure (else one tensor, or a tuple
    of them)."""

    def __init__(self, engine: Engine, in_spec=None, out_spec=None):
        super().__init__()
        self.engine = engine
        self._in_spec = in_spec
        self._out_spec = out_spec

    def forward(self, *args, **kwargs):
        leaves = None
        if self._in_spec is not None:
            from torch.fx._pytree import tree_flatten_spec

            try:
                leaves = [x for x in tree_flatten_spec((args, kwargs), self._in_spec)
                          if isinstance(x, torch.Tensor)]
            except Exception:
                leaves = None
        if leaves is None:
            leaves = self._by_name(args, kwargs) if kwargs else list(args)
        outs = self.engine._native.run_list(leaves)
        if self._out_spec is not None and self._out_spec.num_leaves == len(outs):
            return torch.utils._pytree.tree_unflatten(outs, self._out_spec)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _by_name(self, args, kwargs):
        names = [s.name for s in self.engine.inputs]
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            raise Error(f"the engine has no input `{unknown[0]}` (inputs: {', '.join(names)})")
        given = dict(zip(names, args))
        for k, v in kwargs.items():
            if k in given:
                raise Error(f"input `{k}` is given twice")
            given[k] = v
        missing = [n for n in names if n not in given]
        if missing:
            raise Error(f"input `{missing[0]}` is missing")
        return [given[n] for n in names]

    def extra_repr(self) -> str:
        return repr(self.engine)
