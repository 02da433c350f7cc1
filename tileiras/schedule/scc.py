"""Strongly connected components of a directed graph (Tarjan's algorithm, iterative, so deep graphs
do not hit Python's recursion limit): the scheduler's recurrences and the SASS benchmarks' loops."""

from __future__ import annotations

from typing import Mapping, Sequence


def cyclic_components(succ: Mapping[int, Sequence[int]]) -> list[set[int]]:
    """The components of `succ` (node -> successors) that hold a cycle: more than one node, or one
    node with an edge to itself; in the order Tarjan's algorithm closes them."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    out: list[set[int]] = []
    for root in succ:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on_stack.add(v)
            if i < len(succ[v]):
                work.append((v, i + 1))
                w = succ[v][i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in succ[v]:
                    out.append(comp)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return out
