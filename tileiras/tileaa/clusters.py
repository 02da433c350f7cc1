"""Pass `split-over-cluster`: one tile program spread over the CTAs of a thread-block cluster.

A kernel whose optimization hints ask for `num_cta_in_cga = c` (cuTile's `ct.kernel(num_ctas=c)`)
runs, with NVIDIA's tileiras on sm_90 and newer, as one cluster of c CTAs per tile block. Facts
learned from NVIDIA's tileiras 13.5 (its PTX, `cuobjdump -elf`, its `.nv.host` object), for
TileGym's persistent matmul at 128x512x64 with num_ctas=4 on sm_90 and sm_100:

* Launch. The PTX entry says `.reqnctapercluster 4` and `.blocksareclusters` (PTX ISA 9.0), after
  `.reqntid 256` and `.minnctapersm 1`; no `.explicitcluster`, no `.maxclusterrank`. The cubin's
  `.nv.info` then has `EIATTR_BLOCKS_ARE_CLUSTERS` and `EIATTR_CTA_PER_CLUSTER (4, 1, 1)` beside
  `EIATTR_REQNTID`. The `.nv.host` callbacks are the same code as for a cluster-less kernel (its
  ON_PRE_LOAD disassembles identically to a plain matmul's; ON_ARGUMENTS_CHANGE only writes the
  tensor maps): the grid is never touched on the host. cuTile's launcher passes one block per tile
  block (cuLaunchKernel, no cluster attribute) and each block of that grid is a whole cluster.
* Indexing. The tile program's block id is `%clusterid.x` and its block count `%nclusterid.x`;
  the CTA's part of the tile comes from `%cluster_ctarank` (sm_90) or `%cluster_ctaid.x` (the
  producer of sm_90's TMA loads). `%ctaid` is never read.
* The split: each CTA computes 64x256 of the 128x512 C tile, a 2x2 arrangement: rank bit 0 picks
  the M half, rank bit 1 the N half. Multicast masks come from 16-bit-per-rank tables: A's
  64-row half goes to the ranks of the same M half (0x5 / 0xa), B's 256-column half to the ranks
  of the same N half (0x3 / 0xc); each CTA issues half of each shared box (32 of the 64 rows) with
  `cp.async.bulk.tensor...multicast::cluster` and `mbarrier.expect_tx` for the whole operand.
  Consumers release a stage on every CTA that wrote into it (`mapa.shared::cluster` +
  `mbarrier.arrive.shared::cluster`, empty barriers initialized to 128 x popc(mask) arrivals).
  The mbarrier init is published with `fence.mbarrier_init.release.cluster` and
  `barrier.cluster.arrive.relaxed` / `barrier.cluster.wait` before any copy. C is stored per CTA
  by TMA (4 boxes of 64x64). sm_90: one producer warpgroup, one consumer warpgroup issuing
  `wgmma m64n256k16`. sm_100: the 4 CTAs are two CTA pairs; each pair runs `tcgen05.mma
  .cta_group::2` (issued by the pair's leader, `tcgen05.alloc.cta_group::2`), loads with
  `cp.async.bulk.tensor...cta_group::2` (A multicast between the pairs), completes with
  `tcgen05.commit.cta_group::2...multicast::cluster`; C is again 64x256 per CTA.
* For the block-scaled MXFP8 matmul (256x256x128, num_ctas=2 on sm_100) the pair of CTAs runs
  `tcgen05.mma.cta_group::2.kind::mxf8f6f4.block_scale`, each CTA holding 128 rows.

What this pass does. On sm_100 / sm_103, where the kernel's mma can run as CTA pairs (`_pair_split`:
one K loop's accumulation, M 128 or 256, clusters of 2 or 4), it halves M over CTAs 2i and 2i+1 and
splits N over the pairs, as NVIDIA's (each CTA 64 or 128 rows; `PAIR_ATTR` tells the lowering,
lowering/cta_pair.py). Otherwise, when the mma tile is larger than
one CTA holds (`ONE_CTA_TILE`, 128x256) it rewrites the tile program to the tile of one CTA. Every
tile value gets a label per dimension (M, N, K or none), seeded by the mma ops (A is MxK, B KxN,
the accumulator MxN; block scales MxK/32 and K/32xN) and carried through elementwise ops,
permutes, reshapes (a merged or split run of dimensions splits along its outermost one), splat
constants, loop-carried values and view loads/stores; the split factors make each CTA's tile the
squarest with M, N >= 64 (ties: M within one CTA's 128 rows). The M and N dimensions shrink by
the factors, each view index along a split dimension becomes `index * f + coordinate` (computed
where the index is defined, so pipelined loop bodies stay warp-specializable), the coordinate
coming from the CTA's rank in its cluster (`nv_tileaa.cluster_ctarank`; rank % fM along M,
rank / fM along N), and the block id / count ops read `%clusterid` / `%nclusterid` (the entry's
`CLUSTER_ATTR`). The kernel metadata's `cta_cluster` then makes codegen/clusters.py add the PTX
directives; the host launchers keep passing one block per tile block. Each view load keeps the
labels of its dimensions (`DIMS_ATTR`): on sm_90 the lowering multicasts a tile several CTAs load
(tileas/multicast_groups.py: the persistent matmul's A, read whole by the 4 CTAs of its 1x4 split);
elsewhere each CTA loads its own operand slices.

Anything the labels cannot explain keeps the kernel on one CTA with a `ClusterSplitMissed` remark:
a reduction or other op on a split tile (a broadcast splits along the dimensions it keeps), a
reshape mixing a split dimension into an inner position, pointer tiles, atomics, prints, a view
read two ways or whose index space the kernel reads, a split index that is not i32, a store that
would not cover the split, or a target without clusters (before sm_90; NVIDIA's compiler leaves
the cluster directives out there too).

Left for later (NVIDIA's form): on sm_100 the multicast of A between the pairs of a cluster of 4; on sm_90 NVIDIA's 2x2 split (64x256 a CTA, both operands multicast), which the
factors here do not choose (the squarest tile, 128x128, wins; tileas/multicast_groups.py handles either).
"""

from __future__ import annotations

from typing import Optional

from ..dialects.elementwise import VALUES
from ..dialects.registry import OpDef, OperandDef, find, register
from ..ir.core import Operation, Value
from ..ir.types import PartitionViewType, ScalarType, TileType
from ..target import caps, with_feature
from .hints import cluster_size

CLUSTER_ATTR = "nv_tileaa.cluster"      # on the entry: (cluster CTAs, M factor, N factor)
# on each view load of a split entry: the label ("M", "N" or "") of each tile dimension, from which the
# middle level knows which CTAs of the cluster load the same tile (tileas/multicast_groups.py)
DIMS_ATTR = "nv_tileaa.cluster_dims"
RANK_OP = "nv_tileaa.cluster_ctarank"
# on a split entry whose CTAs 2i and 2i+1 run its mma as one `tcgen05.mma.cta_group::2` (`_pair_split`)
PAIR_ATTR = "nv_tileaa.cta_pair"
_OPCODE = 0x10100                        # above bytecode's range, like nv_tileas' ops

M, N, K = "M", "N", "K"
_I32 = TileType((), ScalarType("i32"))
# The largest accumulator one CTA keeps without spilling (128x256 f32: two consumer warpgroups on
# sm_90, 256 tensor-memory columns on sm_100). Larger tiles are split; smaller ones stay on one CTA,
# where our pipelines (TMA, warp specialization) already serve them.
ONE_CTA_TILE = 128 * 256


def declare() -> None:
    if find(RANK_OP) is None:
        register(OpDef(RANK_OP, _OPCODE, "13.1", results=(OperandDef("result", constraint="tile"),),
                       traits=frozenset({"Pure"}), format="attr-dict `:` custom<CudaTileType>(type($result))"))


def supports_clusters(gpu: str) -> bool:
    """Cluster launches exist from sm_90 on (NVIDIA's compiler uses them on sm_120 as well: the
    persistent 128x512 matmul there is `.reqnctapercluster 4` + `.blocksareclusters`, 384 threads)."""
    return caps(gpu).has("clusters")


class _Refused(Exception):
    pass



_MMA = ("cuda_tile.mmaf", "cuda_tile.mmai", "cuda_tile.mmaf_scaled")
_SCALAR_OK = ("cuda_tile.get_tile_block_id", "cuda_tile.get_num_tile_blocks", "cuda_tile.make_tensor_view",
              "cuda_tile.make_partition_view", "cuda_tile.make_token", "cuda_tile.join_tokens",
              "cuda_tile.assume", "cuda_tile.get_tensor_shape", "cuda_tile.get_index_space_shape",
              "cuda_tile.return", "cuda_tile.constant", "cuda_tile.for", "cuda_tile.if", "cuda_tile.yield",
              "cuda_tile.continue", "cuda_tile.load_view_tko", "cuda_tile.store_view_tko", "cuda_tile.permute",
              "cuda_tile.reshape",
              *_MMA)


class _Labels:
    """Union-find over (value, dim) pairs, each class with at most one label."""

    def __init__(self) -> None:
        self.parent: dict = {}
        self.label: dict = {}

    def find(self, x: tuple) -> tuple:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def tag(self, x: tuple, label: str) -> None:
        r = self.find(x)
        have = self.label.get(r)
        if have is not None and not _compatible(have, label):
            raise _Refused(f"a dimension is both {_said(have)} and {_said(label)}")
        self.label[r] = label

    def union(self, a: tuple, b: tuple) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        la, lb = self.label.get(ra), self.label.get(rb)
        if la is not None and lb is not None and not _compatible(la, lb):
            raise _Refused(f"a dimension is both {_said(la)} and {_said(lb)}")
        self.parent[ra] = rb
        if la is not None:
            self.label[rb] = la

    def of(self, v: object, d: int) -> Optional[str]:
        return self.label.get(self.find((v, d)))


def _compatible(a: str, b: str) -> bool:
    """Labels one dimension may carry at once: equal ones, or the inner dimensions of two reshapes
    (neither is ever split: cuTile's swizzled scale layouts reshape the same dimension twice)."""
    return a == b or a.startswith("inner") and b.startswith("inner")


def _said(label: str) -> str:
    return "an inner dimension of a reshape" if label.startswith("inner") else label


def _rank(v: Value) -> int:
    t = v.type
    return len(t.shape) if isinstance(t, TileType) else 0


def _same(lab: _Labels, a: Value, b: Value) -> None:
    if _rank(a) != _rank(b):
        raise _Refused("a value changes rank")
    for d in range(_rank(a)):
        lab.union((a, d), (b, d))


def _collect(entry: Operation) -> tuple[_Labels, list[Operation]]:
    lab = _Labels()
    ops = [op for op in entry.walk() if op is not entry]
    views: dict[Value, tuple] = {}
    for op in ops:
        name = op.name
        tiles = [v for v in (*op.operands, *op.results) if _rank(v) > 0]
        if name in _MMA:
            a, b, c = op.operands[:3]
            r = op.results[0]
            if _rank(a) != 2 or _rank(b) != 2:
                raise _Refused("a batched mma")
            lab.tag((a, 0), M), lab.tag((a, 1), K), lab.tag((b, 0), K), lab.tag((b, 1), N)
            lab.tag((c, 0), M), lab.tag((c, 1), N)
            _same(lab, c, r)
            if name == "cuda_tile.mmaf_scaled":   # scales: M x K/block and K/block x N
                sa, sb = op.operands[3:5]
                if _rank(sa) != 2 or _rank(sb) != 2:
                    raise _Refused("block scales that are not 2-D")
                lab.tag((sa, 0), M), lab.tag((sb, 1), N)
        elif name in VALUES:
            if any(isinstance(v.type, TileType) and not isinstance(v.type.element, ScalarType) for v in tiles):
                raise _Refused(f"'{name}' on pointer tiles")
            for v in tiles[1:]:
                _same(lab, tiles[0], v)
        elif name == "cuda_tile.permute":
            perm = tuple(op.attributes["permutation"])
            src, dst = op.operands[0], op.results[0]
            for i, p in enumerate(perm):
                lab.union((dst, i), (src, p))
        elif name == "cuda_tile.reshape":
            _reshape(lab, op.operands[0], op.results[0])
        elif name == "cuda_tile.broadcast":
            _broadcast(lab, op.operands[0], op.results[0])
        elif name == "cuda_tile.constant":
            if tiles:
                from ..ir.dense import is_splat

                raw = getattr(op.attributes.get("value"), "raw", None)
                if not isinstance(raw, (bytes, bytearray)) or not is_splat(op.results[0].type, bytes(raw)):
                    raise _Refused("a non-uniform constant tile")
        elif name in ("cuda_tile.load_view_tko", "cuda_tile.store_view_tko"):
            view = op.operand("view")
            vt = view.type
            tile = op.results[0] if name == "cuda_tile.load_view_tko" else op.operands[0]
            if not isinstance(vt, PartitionViewType) or tuple(vt.dim_map) != tuple(range(len(vt.dim_map))) \
                    or view.owner.name != "cuda_tile.make_partition_view":   # type: ignore[union-attr]
                raise _Refused("a view that is not a plain partition view")
            if _rank(tile) != len(vt.tile_shape):
                raise _Refused("a view access that drops dimensions")
            for d in range(_rank(tile)):
                lab.union((tile, d), (view, d))
            views.setdefault(view, ())
        elif name in ("cuda_tile.for", "cuda_tile.if"):
            body = [b for r in op.regions for b in r.blocks]
            inits = op.operands[3:] if name == "cuda_tile.for" else []
            if name == "cuda_tile.for":
                args = body[0].arguments[1:]
                for init, arg, res in zip(inits, args, op.results):
                    _same(lab, init, arg), _same(lab, arg, res)
            for block in body:
                term = block.operations[-1] if block.operations else None
                if term is not None and term.name in ("cuda_tile.continue", "cuda_tile.yield"):
                    for v, res in zip(term.operands, op.results):
                        _same(lab, v, res)
        elif name in _SCALAR_OK:
            pass
        elif tiles:
            raise _Refused(f"'{name}' on a tile")
        elif op.attributes.get("memory_effects") or name.endswith("_tko") or name in (
                "cuda_tile.print_tko", "cuda_tile.assert"):
            raise _Refused(f"'{name}' has effects every CTA would repeat")
    return lab, ops


def _groups(src: tuple, dst: tuple) -> list[tuple[list[int], list[int]]]:
    """The runs of dimensions a row-major reshape maps onto each other (equal products)."""
    out, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        gs, gd, ps, pd = [], [], 1, 1
        while True:
            if ps <= pd and i < len(src) and (ps < pd or not gs or src[i] == 1):
                gs.append(i)
                ps *= src[i]
                i += 1
            elif j < len(dst) and (pd < ps or not gd or dst[j] == 1):
                gd.append(j)
                pd *= dst[j]
                j += 1
            else:
                break
            if ps == pd and gs and gd and (i == len(src) or src[i] != 1) and (j == len(dst) or dst[j] != 1):
                break
        if ps != pd:
            raise _Refused("a reshape the split cannot follow")
        out.append((gs, gd))
    return out


_INNER = [0]


def _reshape(lab: _Labels, src: Value, dst: Value) -> None:
    """A run of dimensions merged or split by a reshape splits along its outermost non-unit
    dimension on both sides (the same contiguous block of elements); its other dimensions never."""
    for gs, gd in _groups(tuple(src.type.shape), tuple(dst.type.shape)):   # type: ignore[attr-defined]
        big_s = [d for d in gs if src.type.shape[d] != 1] or gs[:1]   # type: ignore[attr-defined]
        big_d = [d for d in gd if dst.type.shape[d] != 1] or gd[:1]   # type: ignore[attr-defined]
        if not big_s or not big_d:  # a 0-d side (a scalar made 1x..x1, or back): no dimension to split
            continue
        lab.union((src, big_s[0]), (dst, big_d[0]))
        for v, inner in ((src, big_s[1:]), (dst, big_d[1:])):
            for d in inner:
                _INNER[0] += 1
                lab.tag((v, d), f"inner{_INNER[0]}")


def _broadcast(lab: _Labels, src: Value, dst: Value) -> None:
    """A broadcast splits along the dimensions it keeps; a dimension of one it repeats (a bias row, a
    per-row scale) never splits, each CTA repeating it over its part of the result's."""
    if _rank(src) != _rank(dst):
        raise _Refused("a broadcast that changes rank")
    for d, (s, t) in enumerate(zip(src.type.shape, dst.type.shape)):   # type: ignore[attr-defined]
        if s == t:
            lab.union((src, d), (dst, d))
        else:
            _INNER[0] += 1
            lab.tag((src, d), f"inner{_INNER[0]}")


def _factors(c: int, tm: int, tn: int) -> Optional[tuple[int, int]]:
    """(M factor, N factor) with product `c`: the squarest per-CTA tile, M and N at least 64 (the
    tensor cores' smallest M for a whole warpgroup / CTA); among equals one whose M fits one CTA's
    MMA (128 rows, as NVIDIA's CTA pairs hold), then the larger M."""
    best = None
    for fm in (1, 2, 4, 8, 16):
        if c % fm:
            continue
        fn = c // fm
        if tm % fm or tn % fn or tm // fm < 64 or tn // fn < 64:
            continue
        m, n = tm // fm, tn // fn
        key = (max(m, n) / min(m, n), m > 128, -m)
        if best is None or key < best[0]:
            best = (key, (fm, fn))
    return best[1] if best else None


def _pair_split(gpu: str, c: int, mmas: list[Operation], tm: int, tn: int) -> tuple[Optional[tuple[int, int]], str]:
    """(2, c / 2) where the cluster's CTAs 2i and 2i+1 can run the kernel's mma as one CTA pair
    (`tcgen05.mma.cta_group::2`, M = 128 or 256 over the pair, as NVIDIA's sm_100 kernels with
    num_ctas = 2 or 4): each CTA holds half of the M rows, the pair one N block; else (None, why
    not). Only the form the lowering pairs: one mma, the whole work of a K loop that keeps its
    accumulator in tensor memory from zero (a persistent kernel's inner loop too), A and B staged loads
    of that loop (A stored (M, K), B (K, N) or (N, K): each CTA copies half of B's N), a kind other
    than tf32 and fp4 (block-scaled fp8 at M = 256, its scales loads of the loop too)."""
    from .mma_forms import kind_of
    from .mma_operands import LOOP_BODY_OPS, loaded, passes, resident_loop, scale_loads, source, zero

    if not caps(gpu).has("cta_pairs"):
        return None, f"CTA pairs are {' / '.join(row.name for row in with_feature('cta_pairs'))}'s"
    if c % 2 or len(mmas) != 1:
        return None, "an odd cluster or several mmas"
    op = mmas[0]
    kind = kind_of(op)
    scaled = op.name == "cuda_tile.mmaf_scaled"
    n = tn // (c // 2)
    # block-scaled: fp8 at M = 256 (each CTA's 128 rows in its lanes, their scales beside them)
    if kind is None or kind.name in ("tf32", "mxf4nvf4") or tm not in ((256,) if scaled else (128, 256)) \
            or tn % (c // 2) or n % 16 or not 32 <= n <= 256:
        return None, f"no cta_group::2 MMA for a {tm}x{n} tile of this kind"
    found = resident_loop(op)
    if found is None or not zero(found[0].operand_group("initValues")[found[1]]):
        return None, "the mma is not a loop's accumulation from zero"
    body = found[0].regions[0].block
    a, b = (source(op.operand(name), passes)[0] for name in ("lhs", "rhs"))
    if a is None or b is None or a is b or a.parent is not body or b.parent is not body \
            or loaded(op.operand("lhs")) is not False or loaded(op.operand("rhs")) is None:
        return None, "A and B are not the loop's own loads, A stored (M, K)"
    if scaled and any(getattr(load, "parent", None) is not body for load in scale_loads(op)):
        return None, "the block scales are not the loop's own loads"
    if len(body.arguments) != 2 or any(o is not op and o.name not in (*LOOP_BODY_OPS, "cuda_tile.permute")
                                       for o in body.operations):
        return None, "the loop does more than load and multiply"
    return (2, c // 2), ""


def plan(entry: Operation, gpu: str) -> tuple[Optional[tuple[int, int, int]], str]:
    """(cluster CTAs, M factor, N factor) for `entry` on `gpu`, or None with the reason."""
    return _plan(entry, gpu)[:2]


def _plan(entry: Operation, gpu: str) -> tuple[Optional[tuple[int, int, int]], str, bool]:
    """`plan`, and whether CTAs 2i and 2i+1 run the mma as a CTA pair (`_pair_split`)."""
    c = cluster_size(entry, gpu)
    if c == 1:
        return None, "", False
    if not supports_clusters(gpu):
        return None, f"{gpu} runs it on one CTA", False
    if c not in (2, 4, 8):
        return None, f"a cluster of {c} CTAs is not supported", False
    try:
        lab, ops = _collect(entry)
    except _Refused as why:
        return None, str(why), False
    mmas = [op for op in ops if op.name in _MMA]
    if not mmas:
        return None, "no mma to split", False
    accs = {tuple(op.results[0].type.shape) for op in mmas}   # type: ignore[attr-defined]
    if len(accs) != 1:
        return None, "mmas of different tile shapes", False
    tm, tn = next(iter(accs))
    pair, why_not_pair = _pair_split(gpu, c, mmas, tm, tn)
    if pair is not None:
        fs: Optional[tuple[int, int]] = pair
    elif tm * tn <= ONE_CTA_TILE:
        return None, (f"one CTA holds the {tm}x{tn} tile (without multicast loads a split only makes each "
                      f"CTA's tile smaller; no CTA pair: {why_not_pair})"), False
    else:
        fs = _factors(c, tm, tn)
    if fs is None:
        return None, f"a {tm}x{tn} tile does not split over {c} CTAs", False
    fm, fn = fs
    for op in ops:   # every split dimension divides by its factor
        for v in (*op.operands, *op.results):
            t = v.type
            shape = t.tile_shape if isinstance(t, PartitionViewType) else t.shape if isinstance(t, TileType) else ()
            for d, size in enumerate(shape):
                lbl = lab.of(v, d)
                f = fm if lbl == M else fn if lbl == N else 1
                if size % f:
                    return None, f"dimension {d} of a {shape} value does not split by {f}", False
    split = {lbl for lbl, f in ((M, fm), (N, fn)) if f > 1}
    for op in ops:
        view = op.operands[0] if op.name == "cuda_tile.get_index_space_shape" else op.operand("view") \
            if op.name in ("cuda_tile.load_view_tko", "cuda_tile.store_view_tko") else None
        t = view.type if view is not None else None
        if not isinstance(t, PartitionViewType):
            continue
        dims = [d for d in range(len(t.tile_shape)) if lab.of(view, d) in split]
        if dims and op.name == "cuda_tile.get_index_space_shape":   # it would change with the split
            return None, "the index space of a split view is read", False
        index = op.operand_group("index") if op.name != "cuda_tile.get_index_space_shape" else []
        if any(index[d].type != _I32 for d in dims):
            return None, "a split view index is not i32", False
    for op in ops:   # a store must cover the split: every C-space store is split in M and N alike
        if op.name == "cuda_tile.store_view_tko":
            tile = op.operands[0]
            lbls = [lab.of(tile, d) for d in range(_rank(tile))]
            if (fm > 1 and M not in lbls) or (fn > 1 and N not in lbls):
                return None, "a store every CTA of the cluster would repeat", False
    return (c, fm, fn), "", pair is not None


def split_over_cluster(entry: Operation, gpu: str, remark=None) -> Optional[tuple[int, int, int]]:
    """Rewrite `entry` to one CTA's part of its tiles when its hints ask for a cluster; the plan
    (CTAs, M factor, N factor) or None (the entry unchanged; `remark(why)` told why)."""
    shape, why, pair = _plan(entry, gpu)
    if shape is None:
        if why and remark is not None:
            remark(why)
        return None
    declare()
    c, fm, fn = shape
    lab, ops = _collect(entry)

    def shrink(v: Value) -> None:
        t = v.type
        if isinstance(t, TileType) and t.shape:
            dims = tuple(s // (fm if lab.of(v, d) == M else fn if lab.of(v, d) == N else 1)
                         for d, s in enumerate(t.shape))
            v.type = TileType(dims, t.element)
            owner = getattr(v, "owner", None)
            if isinstance(owner, Operation) and owner.name == "cuda_tile.constant":
                from ..ir.attributes import DenseElements
                from ..ir.dense import element_size

                raw = owner.attributes["value"].raw
                owner.attributes["value"] = DenseElements(v.type, raw[:element_size(t.element)])
        elif isinstance(t, PartitionViewType):
            dims = tuple(s // (fm if lab.of(v, d) == M else fn if lab.of(v, d) == N else 1)
                         for d, s in enumerate(t.tile_shape))
            v.type = PartitionViewType(dims, t.tensor_view, t.dim_map, t.padding_value)

    body = entry.regions[0].block
    first = body.operations[0]
    i32 = _I32
    rank = first.insert_before(Operation(RANK_OP, [], [i32])).results[0]
    factors = {M: fm, N: fn}
    coords: dict[str, Value] = {}   # the CTA's place in the cluster's tile: rank % fm along M, rank / fm along N
    if fm > 1:
        coords[M] = _binary(first, "cuda_tile.remi", rank, const_at(first, fm, i32), i32)
    if fn > 1:
        coords[N] = _binary(first, "cuda_tile.divi", rank, const_at(first, fm, i32), i32)
    scale = {lbl: const_at(first, f, i32) for lbl, f in factors.items() if f > 1}
    seen: set = set()
    mapped: dict = {}
    for op in ops:
        for v in (*op.results, *(a for r in op.regions for b in r.blocks for a in b.arguments)):
            if v not in seen:
                seen.add(v)
                shrink(v)
        if op.name in ("cuda_tile.load_view_tko", "cuda_tile.store_view_tko"):
            view = op.operand("view")
            if op.name == "cuda_tile.load_view_tko":
                op.attributes[DIMS_ATTR] = tuple(
                    lbl if (lbl := lab.of(view, d)) in (M, N) else "" for d in range(len(view.type.tile_shape)))
            index = op.operand_group("index")
            start = op.operands.index(index[0]) if index else 0
            for d, idx in enumerate(index):
                lbl = lab.of(view, d)
                if lbl in (M, N) and factors[lbl] > 1:
                    if (idx, lbl) not in mapped:   # computed where the index is defined: out of the loops
                        at = _just_after(idx, first)
                        scaled = _binary(at, "cuda_tile.muli", idx, scale[lbl], i32)
                        mapped[idx, lbl] = _binary(at, "cuda_tile.addi", scaled, coords[lbl], i32)
                    op.set_operand(start + d, mapped[idx, lbl])
    entry.attributes[CLUSTER_ATTR] = (c, fm, fn)
    if pair:
        entry.attributes[PAIR_ATTR] = True
    return c, fm, fn


def _just_after(value: Value, first: Operation) -> Operation:
    """The op before which code using `value` goes, as early as `value` exists (after `first`, where
    the cluster coordinates are computed)."""
    owner = getattr(value, "owner", None)
    if isinstance(owner, Operation):
        ops = owner.parent.operations   # type: ignore[union-attr]
        at = ops[ops.index(owner) + 1]
    else:
        at = owner.operations[0]   # type: ignore[union-attr]  # a block argument: its block's start
    if at.parent is first.parent and at.parent.operations.index(at) < at.parent.operations.index(first):
        return first
    return at


def const_at(where: Operation, value: int, i32: TileType) -> Value:
    from ..ir.attributes import DenseElements

    raw = value.to_bytes(4, "little", signed=True)
    op = Operation("cuda_tile.constant", [], [i32], {"value": DenseElements(i32, raw)})
    return where.insert_before(op).results[0]


def _binary(where: Operation, name: str, a: Value, b: Value, i32: TileType) -> Value:
    attrs: dict = {"signedness": "signed"} if name in ("cuda_tile.remi", "cuda_tile.divi") else {}
    if name == "cuda_tile.divi":
        attrs["rounding"] = "zero"
    return where.insert_before(Operation(name, [a, b], [i32], attrs)).results[0]


def is_clustered(entry: Operation) -> bool:
    return CLUSTER_ATTR in entry.attributes


def split_entry_over_cluster(entry: Operation, gpu: str) -> None:
    """`split_over_cluster` with its decision reported as a remark."""
    from .. import remarks

    name = str(entry.attributes.get("sym_name"))

    def missed(why: str) -> None:
        if remarks.active():
            remarks.report("missed", "tensorcore", "ClusterSplitMissed", name,
                           f"the kernel asks for a cluster of {cluster_size(entry, gpu)} CTAs; it runs on one "
                           f"CTA: {why}", entry.location)

    done = split_over_cluster(entry, gpu, missed)
    if done is not None and remarks.active():
        c, fm, fn = done
        remarks.report("passed", "tensorcore", "ClusterSplit", name,
                       f"each tile block runs as a cluster of {c} CTAs ({fm}x{fn} over M and N"
                       f"{'; CTAs 2i and 2i+1 share one mma as a CTA pair' if entry.attributes.get(PAIR_ATTR) else ''}"
                       f"), launched with one block per tile block (.blocksareclusters)", entry.location,
                       CTAs=c)
