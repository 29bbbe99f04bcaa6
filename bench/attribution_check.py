"""The attribution check: does every module a kernel's time is placed on do that kernel's work?

    python bench/attribution_check.py MODEL [--device cpu|cuda] [--batch N] [--image-size S]
                                      [--mode training|inference] [--cudagraphs] [--steps N] [--json OUT]

One model's step is compiled in this process as a job compiles it (the job's tag pass and
module capture, tasks/provenance.py and tasks/capture.py), profiled as a job profiles it
(tasks/profiling.py), and placed on model code by sweeper's own attribution
(sweeper/analysis/attribution.py). Beside that, and sharing none of its rules, this script
reads what each kernel computes from Inductor itself while it compiles:

* a generated kernel (Triton, C++): each buffer it writes is one of Inductor's scheduler
  nodes; the FX nodes it computes are the buffer's origins that lie upstream of the value
  it stores (its `origin_node`; without one, every origin no other origin uses), leaving
  out what the kernel only reads: nodes an extern call computes (Inductor adds the extern
  node to the origins of the kernel that makes its input) and graph-wide constants (a
  node that reads no tensor). A module did the work if one of those nodes is its own (its
  `nn_module_stack`, or for a backward node `fwd_nn_module_stack`; a node a decomposition
  made, which has neither, takes the module of the nearest FX node with its very stack trace
  that has one: the check says how many nodes it named so).
* a library kernel: the ATen op that launched it (on a CPU the op is the kernel; on a GPU
  its launch's correlation id inside the op, from one more step traced with host ops);
  inside a compiled module's call (Inductor's `## Call CompiledFxGraph` range), the n-th
  op of a name is the n-th extern call of that op in the module's code.

It prints, and writes as JSON, the share of the step's kernel time placed on modules that
did the work, the modules named by a kernel that computes none of their nodes, how each
kernel was placed, and the share not placed with its reasons. Under CUDA graphs no op
launches a kernel of the graph: its library kernels are then not checked (said so).
Results: bench/results/model_code/attribution_check*.md (bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _environment() -> None:
    """What the job's process sets before torch is imported (tasks/environment.py), in a
    cache of this run's own so that every kernel is compiled here (the truth is read while
    Inductor compiles)."""
    cache = tempfile.mkdtemp(prefix="attribution-check-")
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(cache, "inductor"))
    os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(cache, "triton"))
    os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    os.environ["TORCHINDUCTOR_BENCHMARK_KERNEL"] = "1"
    os.environ["TORCHINDUCTOR_UNIQUE_KERNEL_NAMES"] = "1"
    os.environ["TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"] = "1"


class Truth:
    """What Inductor's scheduler says each generated kernel computes, read as it compiles:
    graph index -> "kernel:handle" -> the (module path, pass) of the nodes it computes
    ("(no module)" for nodes of none)."""

    def __init__(self) -> None:
        self.kernels: dict[int, dict[str, set[tuple[str, str]]]] = defaultdict(dict)
        self.nodes: dict[int, dict[str, set[str]]] = defaultdict(dict)
        self._graphs: dict[int, int] = {}
        self._externs: dict[int, set] = {}
        self.same_call_nodes = 0  # nodes given the module of their call (_same_call)

    def install(self) -> None:
        import torch._inductor.debug as debug

        original = debug.set_kernel_post_grad_provenance_tracing

        def traced(node_schedule, kernel_name, *args, **kwargs):
            handle = original(node_schedule, kernel_name, *args, **kwargs)
            is_extern = kwargs.get("is_extern", args[0] if args else False)
            if handle is not None and not is_extern and isinstance(node_schedule, list):
                try:
                    self._record(node_schedule, f"{kernel_name}:{handle}")
                except Exception as e:  # noqa: BLE001 - a kernel not read is reported, not guessed
                    print(f"truth: {kernel_name}: {type(e).__name__}: {e}", file=sys.stderr)
            return handle

        # the function is imported by name into Inductor's codegen modules: rebind it there too
        for name, mod in list(sys.modules.items()):
            if name.startswith("torch._inductor") and getattr(mod, "set_kernel_post_grad_provenance_tracing",
                                                               None) is original:
                mod.set_kernel_post_grad_provenance_tracing = traced

    def _graph(self):
        from torch._inductor.virtualized import V

        g = V.graph
        if id(g) not in self._graphs:
            self._graphs[id(g)] = len(self._graphs)
            self._externs[id(g)] = self._extern_nodes(g)
        return g, self._graphs[id(g)], self._externs[id(g)]

    @staticmethod
    def _extern_nodes(g) -> set:
        from torch._inductor import ir

        out = set()
        for op in g.operations:
            if isinstance(op, ir.ExternKernel):
                if op.origin_node is not None:
                    out.add(op.origin_node)
                overload = getattr(op, "op_overload", None)
                out |= {n for n in op.origins if overload is not None and n.target == overload}
        return out

    def _same_call(self, node):
        """The module stack of a node's own call where Inductor left it none: a decomposition
        (SiLU's backward into sigmoid, mul, sub, add) copies the stack trace of the node it
        replaces but not its module stack; the check takes the module of the nearest FX node
        with that very stack trace that has one (the rule sweeper's tag pass states too),
        and counts the nodes it names so."""
        def call_of(n) -> str:  # the stack trace as torch wrote it, without the tag sweeper appends
            return (n.meta.get("stack_trace") or "").split("  [sweeper module]")[0]

        text = call_of(node)
        if not text:
            return None
        seen, frontier = {node}, [node]
        while frontier:
            nxt = []
            for n in frontier:
                for m in list(n.all_input_nodes) + list(n.users):
                    if m in seen or call_of(m) != text:
                        continue
                    seen.add(m)
                    stack = m.meta.get("nn_module_stack") or m.meta.get("fwd_nn_module_stack")
                    if stack:
                        self.same_call_nodes += 1
                        return stack
                    nxt.append(m)
            frontier = nxt
        return None

    def _record(self, node_schedule, key: str) -> None:
        g, index, externs = self._graph()
        backward = any(n.op == "placeholder" and n.name.startswith("tangents") for n in g.graph.nodes)
        computed: set = set()
        for snode in node_schedule:
            buf = getattr(snode, "node", None)
            if buf is None or not hasattr(buf, "origins"):
                continue  # EnableReduction / DisableReduction markers
            origins = {n for n in buf.origins if n not in externs and not (n.op == "call_function"
                                                                           and not n.all_input_nodes)}
            stored = buf.get_origin_node() if hasattr(buf, "get_origin_node") else None
            sinks = [stored] if stored in origins else [n for n in origins if not any(u in origins for u in n.users)]
            seen: set = set()
            todo = list(sinks)
            while todo:
                n = todo.pop()
                if n in seen or n not in origins:
                    continue
                seen.add(n)
                todo.extend(n.all_input_nodes)
            computed |= seen
        modules = set()
        for n in computed:
            stack = n.meta.get("nn_module_stack") or n.meta.get("fwd_nn_module_stack") or self._same_call(n)
            if not stack:
                modules.add(("(no module)", ""))
                continue
            path = str(list(stack.values())[-1][0])
            pass_ = "backward" if backward or not n.meta.get("nn_module_stack") else "forward"
            modules.add((path, pass_))
        self.kernels[index][key] = modules
        self.nodes[index][key] = {n.name for n in computed}


def _extern_sequence(sites) -> list[str]:
    from sweeper.analysis.launch_sites import extern_op

    return [extern_op(s.kernel) for s in sites if s.extern]


def library_truth(events: list[dict], modules_sites: list) -> dict[tuple[str, float], tuple[int, int]]:
    """(op name, op start) of each extern op run inside a compiled module's call -> the
    launch site (module, position) that ran it: the n-th op of a name in the call is the
    n-th extern call of that op in the module's code. A call is matched to the module whose
    extern calls are its ops, in order."""
    from sweeper.analysis.launch_sites import extern_op

    calls = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)), e.get("tid")) for e in events
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith("## Call CompiledFxGraph"))
    wanted = {extern_op(s.kernel) for sites in modules_sites for s in sites if s.extern}
    ops_by_tid: dict = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op" and "::" in str(e.get("name", "")):
            ops_by_tid[e.get("tid")].append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)), str(e["name"])))
    out: dict[tuple[str, float], tuple[int, int]] = {}
    for start, end, tid in calls:
        inside = sorted((o for o in ops_by_tid[tid] if start <= o[0] and o[1] <= end), key=lambda o: (o[0], -o[1]))
        outer, last_end = [], float("-inf")
        for o in inside:
            if o[1] <= last_end:
                continue
            last_end = o[1]
            if o[2].split("::")[-1] in wanted:
                outer.append(o)
        seq = [o[2].split("::")[-1] for o in outer]
        matches = [m for m, sites in enumerate(modules_sites) if _extern_sequence(sites) == seq]
        if len(matches) != 1:
            continue
        m = matches[0]
        positions: dict[str, list[int]] = defaultdict(list)
        for p, s in enumerate(modules_sites[m]):
            if s.extern:
                positions[extern_op(s.kernel)].append(p)
        seen: dict[str, int] = defaultdict(int)
        for o in outer:
            name = o[2].split("::")[-1]
            out[(o[2], o[0])] = (m, positions[name][seen[name]])
            seen[name] += 1
    return out


def run(model: str, device: str, batch: int, image_size: int | None, training: bool, cudagraphs: bool,
        steps: int) -> dict:
    _environment()
    import torch

    from sweeper.analysis import attribution as at
    from sweeper.analysis import trace as tr
    from sweeper.analysis.launch_sites import fit_path, sites_of, with_known_paths
    from sweeper.analysis.node_tags import normalize_path
    from sweeper.torch_internals.probes import inductor_config
    from tasks import provenance
    from tasks.capture import ModuleCapture
    from tasks.profiling import link_call, profiled_kernels, profile_calls
    from tasks.workload import build_workload

    config = inductor_config()
    config.benchmark_kernel = True
    config.triton.unique_kernel_names = True
    config.cpp.enable_kernel_profile = True
    provenance.install()
    truth = Truth()
    truth.install()
    amp = torch.bfloat16 if device == "cpu" else torch.float16
    w = build_workload(model, batch, image_size, training, amp, device)
    mode = "reduce-overhead" if cudagraphs else "default"
    step = w.make_step(torch.compile(w.forward_fn(), mode=mode))
    with ModuleCapture() as capture:
        for _ in range(3):
            step()
    if device == "cuda":
        torch.cuda.synchronize()
    known = {name for name, _ in w.model.named_modules()}
    modules = [with_known_paths(sites_of(Path(m.path).read_text(), m.stack_traces or {}), known)
               for m in capture.modules]
    with tempfile.TemporaryDirectory() as tmp:
        events = profile_calls(step, steps, device, "check.step", Path(tmp) / "step.json.gz")
        linked = link_call(step, device, "check.step") if device == "cuda" and not cudagraphs else None
        link_events = None
        if device == "cuda" and not cudagraphs:  # the truth's own host-op trace: one more step
            from torch.profiler import ProfilerActivity, profile, record_function

            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                with record_function("check.step"):
                    step()
                torch.cuda.synchronize()
            prof.export_chrome_trace(str(Path(tmp) / "links.json"))
            link_events = json.loads((Path(tmp) / "links.json").read_text())["traceEvents"]
    kernels = profiled_kernels(events, device, tr.annotation_ranges(events, "check.step"))
    links = tr.transfer_links(kernels, steps, linked) if linked else None
    placed = at.attribute_events(kernels, modules, steps, links)

    # the truth of each library kernel event: the site whose op launched it
    lib_truth: list[tuple[int, int] | None] = [None] * len(kernels)
    lib_checked = device == "cpu" or link_events is not None
    if device == "cpu":
        by_op = library_truth(events, modules)
        for i, k in enumerate(kernels):
            lib_truth[i] = by_op.get((k.name, k.start_us))
    elif link_events is not None:
        by_op = library_truth(link_events, modules)
        own = tr.transfer_links(kernels, steps, tr.device_links(link_events))
        for i, link in enumerate(own or []):
            lib_truth[i] = by_op.get(link) if link else None
    site_at = {id(s): (m, p) for m, sites in enumerate(modules) for p, s in enumerate(sites)}

    def truth_modules(m: int, site) -> set[tuple[str, str]] | None:
        got = truth.kernels.get(m, {}).get(site.key)
        if got is None:
            return None
        return {(fit_path(normalize_path(path), known) if path != "(no module)" else path, pass_)
                for path, pass_ in got}

    total = placed_ms = right_ms = unchecked_ms = 0.0
    wrong: dict[str, float] = defaultdict(float)
    lib = {"placed_ms": 0.0, "right_ms": 0.0, "unchecked_ms": 0.0}
    gen = {"placed_ms": 0.0, "right_ms": 0.0, "unchecked_ms": 0.0}
    no_module: dict[str, float] = defaultdict(float)
    for i, (e, sites) in enumerate(zip(kernels, placed.event_sites)):
        ms = e.dur_us / 1000 / steps
        total += ms
        for site, weight in sites:
            m, p = site_at[id(site)]
            shares = site.layer_shares()
            on = ms * weight * sum(shares)
            if ms * weight - on > 1e-9:  # the share of nodes of no module (or a site of none)
                no_module[f"{site.key} ({', '.join(site.aten_ops[:4])})"] += ms * weight - on
            if not site.layers:
                continue
            placed_ms += on
            part = gen if not site.extern else lib
            part["placed_ms"] += on
            if site.extern:
                if not lib_checked or lib_truth[i] is None:
                    part["unchecked_ms"] += on
                    unchecked_ms += on
                elif lib_truth[i] == (m, p):
                    part["right_ms"] += on
                    right_ms += on
                else:
                    wrong[f"{site.key} (module {m}): launched by site {lib_truth[i]}"] += on
                continue
            did = truth_modules(m, site)
            if did is None:
                part["unchecked_ms"] += on
                unchecked_ms += on
                continue
            for layer, share in zip(site.layers, shares):
                if (layer.path, layer.pass_) in did:
                    part["right_ms"] += ms * weight * share
                    right_ms += ms * weight * share
                else:
                    wrong[f"{site.key} (module {m}) names {layer.label()}"] += ms * weight * share
    checked = placed_ms - unchecked_ms
    return {
        "model": model, "device": device, "batch": batch, "mode": "training" if training else "inference",
        "cudagraphs": cudagraphs, "torch": torch.__version__, "steps": steps,
        "kernel_ms_a_step": total, "placed_ms": placed_ms,
        "placed_pct_of_kernel_time": placed_ms / total * 100 if total else None,
        "checked_ms": checked, "right_ms": right_ms,
        "right_pct_of_checked": right_ms / checked * 100 if checked else None,
        "generated": gen, "library": lib, "library_checked": lib_checked,
        "links": links is not None,
        "how_ms": dict(placed.how), "not_placed_ms": dict(placed.unattributed),
        "wrong": dict(sorted(wrong.items(), key=lambda kv: -kv[1])),
        "modules_named_without_work": len(wrong),
        "no_module": dict(sorted(no_module.items(), key=lambda kv: -kv[1])[:10]),
        "kernels_read": sum(len(v) for v in truth.kernels.values()),
        "same_call_nodes": truth.same_call_nodes,
        "rows": at.summary(placed)["rows"],
    }


def report(got: dict) -> str:
    def pct(v):
        return "-" if v is None else f"{v:.2f}%"

    lines = [f"## {got['model']} {got['mode']} b{got['batch']} on {got['device']}"
             f"{' (CUDA graphs)' if got['cudagraphs'] else ''}, torch {got['torch']}",
             "",
             f"- kernel time a step {got['kernel_ms_a_step']:.3f} ms; placed on model modules "
             f"{got['placed_ms']:.3f} ms ({pct(got['placed_pct_of_kernel_time'])})",
             f"- **on modules that did the work: {pct(got['right_pct_of_checked'])} of the placed time checked** "
             f"({got['right_ms']:.3f} of {got['checked_ms']:.3f} ms; {got['kernels_read']} generated kernels read "
             f"from Inductor; {got['same_call_nodes']} computed nodes of no module stack given their call's module)",
             f"- generated kernels: {got['generated']['right_ms']:.3f} of {got['generated']['placed_ms']:.3f} ms right, "
             f"{got['generated']['unchecked_ms']:.3f} ms not checked",
             f"- library kernels: {got['library']['right_ms']:.3f} of {got['library']['placed_ms']:.3f} ms right, "
             f"{got['library']['unchecked_ms']:.3f} ms not checked"
             + ("" if got["library_checked"] else " (CUDA graphs: no op launches a kernel of the graph)"),
             f"- modules named by a kernel that computes none of their nodes: {got['modules_named_without_work']}",
             "- placed how (ms a step): " + "; ".join(f"{k}: {v:.3f}" for k, v in got["how_ms"].items()),
             "- not placed (ms a step): " + ("; ".join(f"{k}: {v:.3f}" for k, v in got["not_placed_ms"].items())
                                            or "none")]
    for what, ms in list(got["wrong"].items())[:10]:
        lines.append(f"  - wrong: {what}: {ms:.4f} ms")
    if got.get("no_module"):
        lines.append("- the launch sites with most time on nodes of no model module (ms a step): "
                     + "; ".join(f"{k}: {v:.3f}" for k, v in list(got["no_module"].items())[:3]))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--image-size", type=int, default=None)
    ap.add_argument("--mode", default="training", choices=["training", "inference"])
    ap.add_argument("--cudagraphs", action="store_true")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    got = run(a.model, a.device, a.batch, a.image_size, a.mode == "training", a.cudagraphs, a.steps)
    print(report(got))
    if a.json:
        a.json.write_text(json.dumps(got, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
