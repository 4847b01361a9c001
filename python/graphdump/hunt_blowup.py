"""graphdump hunt's answer for a blow-up (docs/hunt.md, "Blow-ups"): when the first hit is an
optimizer's update kernel whose update blew a weight up (weight-change), the optimizer, the
step (iteration), the line of its `optimizer.step()`, the hyperparameters of the parameter's
group at that step (lr, betas, ... from the graph files) and the update's size against its
size at the step before, measured with NumPy on the tensor dump. Imports no torch."""
import os

import numpy

try:
    from . import hunt_answer, update_kernels
except ImportError:  # hunt_cli.py run as a script (graphdump hunt)
    import hunt_answer
    import update_kernels

# The checks of a blow-up hunt (beside nan, inf, overflow), each with an optional ":T".
CHECKS = ("large", "weight-change", "loss-spike")


def check_name(check):
    """'large' of 'large:1e5'."""
    return check.split(":", 1)[0]


def _hyperparameters(dumps, hit):
    """(param_group, runs) recorded for the hit's kernel in the first of `dumps` that has it."""
    for dump in dumps:
        path = os.path.join(dump, f"rank_{hit['rank']}", "graphs",
                            f"ms_output_trace_code_graph_{hit['graph_id']}.ir")
        entry = update_kernels.read_ir(path).get(hit["kernel"])
        if entry is not None:
            return entry
    return None, None


def _norm(array):
    return float(numpy.linalg.norm(array.astype(numpy.float64).ravel()))


def _update_sizes(listing, hit):
    """{iteration: (||w_after - w_before||, ||w_before||)} of the hit's update kernel (the same
    call) in the tensor dump, from its input 0 and output 0 files."""
    wanted = hunt_answer.kernel_without_id(hit["kernel"])
    exact, by_stripped = {}, {}
    for (rank, graph, iteration, kernel, call), files in \
            hunt_answer.TensorDump(listing).calls.items():
        if (rank, graph, call) != (hit["rank"], hit["graph_id"], hit["call"]):
            continue
        if kernel != hit["kernel"] and hunt_answer.kernel_without_id(kernel) != wanted:
            continue
        before, after = files.get(("input", 0)), files.get(("output", 0))
        if before is None or after is None:
            continue
        try:
            a = numpy.load(before, allow_pickle=False)
            b = numpy.load(after, allow_pickle=False)
        except (OSError, ValueError):
            continue
        if a.shape != b.shape or a.dtype.kind not in "fc" or b.dtype.kind not in "fc":
            continue
        size = (_norm(b.astype(numpy.float64) - a.astype(numpy.float64)), _norm(a))
        (exact if kernel == hit["kernel"] else by_stripped)[iteration] = size
    return exact or by_stripped


def explain(hit, listing, dumps):
    """The blow-up answer (a dict, docs/hunt.md) of `hit` (watch's hit dict), or None when it
    is not an update kernel's. `listing` is ``graphdump ls --json --kernels`` of the tensor
    dump, `dumps` the dump roots whose graph files are read for the hyperparameters (the
    hit's own pass first)."""
    kernel = hit.get("kernel") or ""
    if not update_kernels.is_update_kernel(kernel):
        return None
    iteration = hit["iteration"]
    group, runs = _hyperparameters(dumps, hit)
    now = update_kernels.at_iteration(runs, iteration) if runs else None
    before = update_kernels.at_iteration(runs, iteration - 1) if runs else None
    trace = hit.get("source_trace") or []
    code = ""
    for frame in trace:
        if hit.get("source_line", "").endswith(
                f"{os.path.basename(frame.get('file', ''))}:{frame.get('line')}"):
            code = frame.get("code", "")
            break
    sizes = _update_sizes(listing, hit) if listing is not None else {}
    size, usual = sizes.get(iteration), sizes.get(iteration - 1)
    return {
        "optimizer": kernel.split("/")[1][len("optimizer-"):],
        "kernel": kernel,
        "parameter": kernel.split("/")[2] if kernel.count("/") >= 3 else "",
        "iteration": iteration,
        "step_line": hit.get("source_line") or None,
        "step_code": code,
        "param_group": group,
        "lr": (now or {}).get("lr"),
        "hyperparameters": now,
        "previous_lr": (before or {}).get("lr"),
        "update_norm": size[0] if size else None,
        "weight_norm": size[1] if size else None,
        "usual_update_norm": usual[0] if usual else None,
        "usual_iteration": iteration - 1 if usual else None,
        "update_ratio": (size[0] / usual[0] if size and usual and usual[0] > 0 else None),
    }


def lines(blowup):
    """The blow-up answer as lines of text."""
    if not blowup:
        return []
    hyper = blowup.get("hyperparameters") or {}
    others = ", ".join(f"{k} {v}" for k, v in hyper.items() if k != "lr")
    lr = blowup.get("lr")
    was = blowup.get("previous_lr")
    out = [f"the update that blew the weights up: {blowup['optimizer']} step at iteration "
           f"{blowup['iteration']} ({blowup['parameter']}), "
           f"line {blowup.get('step_line') or '(not recorded)'}"
           + (f": {blowup['step_code']}" if blowup.get("step_code") else ""),
           f"  lr {lr if lr is not None else '(not recorded)'}"
           + (f" (was {was} at iteration {blowup['iteration'] - 1})"
              if was is not None and was != lr else "")
           + (f"; param group {blowup['param_group']}" if blowup.get("param_group") is not None
              else "")
           + (f"; {others}" if others else "")]
    if blowup.get("update_norm") is not None:
        text = (f"  update size ||w - w_before|| {blowup['update_norm']:.6g} "
                f"(||w_before|| {blowup['weight_norm']:.6g})")
        if blowup.get("usual_update_norm") is not None:
            text += (f" against {blowup['usual_update_norm']:.6g} at iteration "
                     f"{blowup['usual_iteration']}")
            if blowup.get("update_ratio") is not None:
                text += f": {blowup['update_ratio']:.3g}x its usual size"
        out.append(text)
    return out
