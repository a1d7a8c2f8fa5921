"""p4c's IR of a program, as ``p4test --toJSON`` writes it after its midend: an index over its nodes.

The JSON holds every node once; a later use of the same node is ``{"Node_ID": n}`` alone.  :class:`IR`
resolves such references, names declarations by their ``@name`` annotation (the name the program gave
them, before the midend made them unique) and gives each expression's bit width from its type.
"""

from __future__ import annotations

from typing import Any, Iterator

Node = dict[str, Any]


class IRError(ValueError):
    """The IR has a form the reader does not know (a program p4gen did not write, or a p4c it was not
    written for)."""


class IR:
    def __init__(self, root: Node):
        self.nodes: dict[int, Node] = {}
        self._index(root)
        self.root = root
        self.top: list[Node] = [self.get(o) for o in root["objects"]["vec"]]

    def _index(self, root: Any) -> None:
        stack = [root]
        while stack:
            x = stack.pop()
            if isinstance(x, dict):
                if "Node_Type" in x and "Node_ID" in x:
                    self.nodes.setdefault(x["Node_ID"], x)
                for k, v in x.items():
                    if k != "Source_Info" and isinstance(v, (dict, list)):
                        stack.append(v)
            elif isinstance(x, list):
                stack.extend(v for v in x if isinstance(v, (dict, list)))

    def get(self, node: Node | None) -> Node | None:
        """``node`` itself, or the node a bare ``{"Node_ID": n}`` refers to."""
        if node is None or "Node_Type" in node:
            return node
        try:
            return self.nodes[node["Node_ID"]]
        except KeyError:
            raise IRError(f"the IR refers to node {node.get('Node_ID')} that it does not hold") from None

    def vec(self, node: Node | None) -> list[Node]:
        """The elements of a ``Vector``/``IndexedVector`` node (or of the node under ``vec``)."""
        node = self.get(node)
        if node is None:
            return []
        return [self.get(x) for x in node.get("vec", [])]

    # -- declarations ------------------------------------------------------------------------------

    def find(self, node_type: str, name: str | None = None) -> list[Node]:
        return [o for o in self.top if o["Node_Type"] == node_type and (name is None or o.get("name") == name)]

    def type_decl(self, name: str) -> Node:
        for o in self.top:
            if o.get("name") == name and o["Node_Type"].startswith("Type_"):
                return o
        raise IRError(f"the program declares no type {name!r}")

    def annotation(self, node: Node, name: str) -> list[Any] | None:
        """The expression values of annotation ``@name(...)`` on ``node`` (None when absent)."""
        ann = self.get(node.get("annotations"))
        for a in self.vec(ann) if ann else []:
            if a.get("name") == name:
                body = a.get("body") or {}
                value = body.get("value") if isinstance(body, dict) else None
                if isinstance(value, dict) and "vec" in value:
                    return [self.get(e) for e in value["vec"]]
                return []
        return None

    def user_name(self, node: Node) -> str:
        """The name the program gave ``node`` (``@name("Ctl.x")`` -> ``x``), else its IR name."""
        vals = self.annotation(node, "name")
        if vals:
            v = vals[0].get("value")
            if isinstance(v, str):
                return v.split(".")[-1]
        return node.get("name")

    def pname(self, node: Node) -> str:
        """The name a ``PathExpression`` or ``Type_Name`` refers to."""
        return self.get(self.get(node)["path"])["name"]

    # -- types -------------------------------------------------------------------------------------

    def type_of(self, expr: Node) -> Node:
        t = self.get(expr.get("type"))
        while t is not None and t["Node_Type"] in ("Type_Name", "Type_Typedef", "Type_Newtype"):
            if t["Node_Type"] == "Type_Name":
                t = self.type_decl(self.pname(t))
            else:
                t = self.get(t["type"])
        if t is None:
            raise IRError(f"no type on {expr.get('Node_Type')} node {expr.get('Node_ID')}")
        return t

    def resolve_type(self, t: Node) -> Node:
        t = self.get(t)
        while t["Node_Type"] in ("Type_Name", "Type_Typedef", "Type_Newtype"):
            t = self.type_decl(self.pname(t)) if t["Node_Type"] == "Type_Name" else self.get(t["type"])
        return t

    def fields(self, t: Node) -> list[tuple[str, Node]]:
        """(name, type) of a struct's or header's fields, in order."""
        t = self.resolve_type(t)
        if t["Node_Type"] == "Type_SpecializedCanonical":
            t = self.resolve_type(t["substituted"])
        return [(f["name"], self.resolve_type(f["type"])) for f in self.vec(t["fields"])]

    @staticmethod
    def bits(t: Node) -> int | None:
        """The width of a bit-string type (None: bool or anything else)."""
        if t["Node_Type"] == "Type_Bits":
            return int(t["size"])
        return None

    def line(self, node: Node) -> int | None:
        si = node.get("Source_Info")
        return si.get("line") if isinstance(si, dict) else None


def walk(node: Any) -> Iterator[Node]:
    """Every full node under ``node`` (references left unresolved)."""
    stack = [node]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if "Node_Type" in x:
                yield x
            stack.extend(v for k, v in x.items() if k != "Source_Info" and isinstance(v, (dict, list)))
        elif isinstance(x, list):
            stack.extend(x)
