"""The component tree of a built model: which registered component made each part, and its parameters.

Only modules that a registered component built (``model.zoo_components``) and the containers leading to them
are nodes; a component's own sub-layers (``q_proj``) are its business. Consecutive identical siblings in a
list (twelve equal blocks, eight equal experts) fold into one node with ``repeat`` = their number.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import nn

from .params import component_owner

__all__ = ["TreeNode", "component_tree"]


@dataclass
class TreeNode:
    name: str
    """The attribute name (``attention``), or an index range for folded list items (``0-11``)."""
    module: str
    """The module's class name."""
    params: int
    """Parameters in this subtree (of one item, when folded), a tied tensor counted where it first appears."""
    kind: str | None = None
    component: str | None = None
    """The registered name, for modules a component built."""
    plugin: str | None = None
    repeat: int = 1
    tied: list[str] = field(default_factory=list)
    """``'proj.weight = embedding.token.weight'`` for each tensor this subtree shares with an earlier one."""
    children: list[TreeNode] = field(default_factory=list)

    def signature(self) -> tuple:
        """What makes two siblings the same (not their name, nor how many this node already folds)."""
        own = (self.module, self.params, self.kind, self.component, self.plugin, len(self.tied))
        return own + tuple((c.repeat, c.signature()) for c in self.children)


def _prefixes(path: str) -> list[str]:
    parts = path.split(".") if path else []
    return [""] + [".".join(parts[: i + 1]) for i in range(len(parts))]


def _fold(children: list[TreeNode]) -> list[TreeNode]:
    """Fold runs of identical, index-named siblings into one node."""
    out: list[TreeNode] = []
    for child in children:
        last = out[-1] if out else None
        if last is not None and child.name.isdigit() and last.signature() == child.signature():
            first = last.name.split("-")[0]
            last.repeat += 1
            last.name = f"{first}-{child.name}"
            continue
        out.append(child)
    return out


def component_tree(model: nn.Module) -> TreeNode:
    """The tree of components of a model built by ``zoo.build`` (works on the meta device)."""
    provenance = getattr(model, "zoo_components", {})
    params: dict[str, int] = {}
    tied: dict[str, list[str]] = {}
    first_name: dict[int, str] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        module_path = name.rsplit(".", 1)[0] if "." in name else ""
        if id(p) in first_name:
            owner = component_owner(module_path, provenance) or ""
            relative = name[len(owner) + 1 :] if owner else name
            tied.setdefault(owner, []).append(f"{relative} = {first_name[id(p)]}")
            continue
        first_name[id(p)] = name
        for prefix in _prefixes(module_path):
            params[prefix] = params.get(prefix, 0) + p.numel()
    shown = {prefix for path in provenance for prefix in _prefixes(path)}

    def visit(path: str, name: str, module: nn.Module) -> TreeNode:
        made = provenance.get(path)
        children = [
            visit(f"{path}.{n}" if path else n, n, child)
            for n, child in module.named_children()
            if (f"{path}.{n}" if path else n) in shown
        ]
        return TreeNode(
            name=name,
            module=type(module).__name__,
            params=params.get(path, 0),
            kind=made.kind if made else None,
            component=made.name if made else None,
            plugin=made.plugin if made else None,
            tied=tied.get(path, []),
            children=_fold(children),
        )

    return visit("", "", model)
