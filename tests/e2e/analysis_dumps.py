"""Builds dump directories in MindSpore's layout (docs/layout.md) with numpy, for the analysis tests.

A kernel is a dict: full_name, outputs (list of arrays), optional inputs, source
(file, line, code). `write_dump` writes one rank/graph with the given iterations.
"""
import os

import numpy as np


def file_kernel_name(full_name):
    for c in '/\\. ':
        full_name = full_name.replace(c, '_')
    return full_name


def op_type_of(full_name):
    last = full_name.rsplit('/', 1)[-1]
    if '-op' in last:
        last = last[:last.rindex('-op')]
    return last


def ms_dtype(arr, cpu_suffix):
    name = str(arr.dtype)
    if not cpu_suffix:
        return name
    return {'float32': 'Float32', 'float16': 'Float16', 'float64': 'Float64', 'int64': 'Int64',
            'int32': 'Int32', 'bool': 'Bool'}[name]


def stat_row(op_type, op_name, io, slot, arr):
    a = arr.astype(np.float64)
    shape = '"(' + ','.join(str(d) for d in arr.shape) + ')"'
    mx = a.max() if a.size else 0
    mn = a.min() if a.size else 0
    l2 = np.sqrt((a * a).sum())
    if np.isnan(a).any():
        mx = mn = l2 = float('nan')
    fields = [op_type, op_name, '0', '0', '1', io, str(slot), str(arr.nbytes), str(arr.dtype), shape,
              '%g' % mx, '%g' % mn, '%g' % l2, str(int(np.isnan(a).sum()))]
    return ','.join(fields) + ',\n'


STAT_HEADER = ('Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,'
               'Max Value,Min Value,L2Norm Value,NaN Count\n')


def write_dump(root, iterations, net='Net', graph=0, rank=0, cpu_suffix=False, files=True,
               stats=False, parameters=None, long_names=False, clock=1700000000000000):
    """iterations: {iteration: [kernel dicts]} (the same kernels each iteration, in order).
    parameters: {iteration: {name: array}}. clock: the first timestamp (microseconds; a rank
    on another machine has another clock). Returns the rank directory."""
    rank_dir = os.path.join(root, 'rank_%d' % rank)
    first = next(iter(iterations.values()))
    os.makedirs(os.path.join(rank_dir, 'execution_order'), exist_ok=True)
    os.makedirs(os.path.join(rank_dir, 'graphs'), exist_ok=True)
    with open(os.path.join(rank_dir, 'execution_order',
                           'ms_execution_order_graph_%d.csv' % graph), 'w') as f:
        f.write('NodeExecutionOrder-FullNameWithScope\n')
        for k in first:
            f.write(k['full_name'] + '\n')
    with open(os.path.join(rank_dir, 'graphs', 'ms_output_trace_code_graph_%d.ir' % graph),
              'w') as f:
        f.write('# IR entry: @graph_%d\n' % graph)
        for i, k in enumerate(first):
            f.write('  %%%d(CNode_%d) = %s(%%%d)\n' % (i + 1, i, op_type_of(k['full_name']), i))
            f.write('      : (<Tensor[Float32], ()>) -> (<Tensor[Float32], ()>)\n')
            f.write('      # Fullname with scope: (%s)\n' % k['full_name'])
            if 'source' in k:
                path, line, code = k['source']
                f.write('      # In file %s(%d)/        %s/\n' % (path, line, code))
                f.write('      # In file /usr/lib/python3/torch/nn/modules/module.py(1190)/'
                        '        return forward_call(*input)/\n')
    ts = clock
    for it, kernels in iterations.items():
        d = os.path.join(rank_dir, net, str(graph), str(it))
        os.makedirs(d, exist_ok=True)
        rows, mapping = [], []
        for (name, arr) in (parameters or {}).get(it, {}).items():
            fname = 'Parameter.%s.0.0.%d.output.0.DefaultFormat.%s.npy' % (
                name, ts, ms_dtype(arr, cpu_suffix))
            np.save(os.path.join(d, fname), arr)
        for k in kernels:
            op_type = k.get('op_type', op_type_of(k['full_name']))
            op_name = file_kernel_name(k['full_name'])
            for io, arrays in (('input', k.get('inputs', [])), ('output', k['outputs'])):
                for slot, arr in enumerate(arrays):
                    ts += 1
                    fname = '%s.%s.0.0.%d.%s.%d.DefaultFormat.%s.npy' % (
                        op_type, op_name, ts, io, slot, ms_dtype(arr, cpu_suffix))
                    if files:
                        if long_names and len(mapping) == 0:
                            short = '%d.npy' % (123456 + slot)
                            mapping.append('%s,%s\n' % (short, fname))
                            fname = short
                        np.save(os.path.join(d, fname), arr)
                    if stats:
                        rows.append(stat_row(op_type, op_name, io, slot, arr))
        if stats:
            with open(os.path.join(d, 'statistic.csv'), 'w') as f:
                f.write(STAT_HEADER + ''.join(rows))
        if mapping:
            with open(os.path.join(d, 'mapping.csv'), 'w') as f:
                f.write(''.join(mapping))
    return rank_dir


def simple_net(seed=0, n=6, size=(4, 8), op_ids=None, scope='Default/net-Net', dtype=np.float32):
    """n kernels in a chain, with source lines model.py:10+i. Returns the kernel list."""
    rng = np.random.default_rng(seed)
    kernels = []
    types = ['Conv2D', 'ReLU', 'MatMul', 'Add', 'Softmax', 'Mul', 'Sub', 'Tanh']
    x = rng.standard_normal(size).astype(dtype)
    for i in range(n):
        op_id = (op_ids or list(range(n)))[i]
        t = types[i % len(types)]
        y = (x * 0.9 + 0.1).astype(dtype)
        kernels.append({'full_name': '%s/layer%d-Layer/%s-op%d' % (scope, i, t, op_id),
                        'inputs': [x], 'outputs': [y],
                        'source': ('/home/user/project/model.py', 10 + i, 'x = self.layer%d(x)' % i)})
        x = y
    return kernels


def shifted_iterations(net, count, inputs=True):
    """{iteration: kernels} for iterations 0..count-1 of `net` (simple_net's list): iteration
    i's outputs are the net's plus i; inputs left out unless `inputs`."""
    import copy
    its = {}
    for it in range(count):
        ks = copy.deepcopy(net)
        for k in ks:
            k['outputs'] = [k['outputs'][0] + it]
            if not inputs:
                del k['inputs']
        its[it] = ks
    return its


def write_rank_pair(a, b, rank, kernels_a, kernels_b, param_shift=0.0):
    """Rank `rank` of dumps `a` and `b`: two iterations of the kernels of each side, and a
    parameter `w` (8 values counting up from the rank; B's shifted by `param_shift`)."""
    w = np.arange(8, dtype=np.float32) + rank
    w_b = w + param_shift
    write_dump(a, {0: kernels_a, 1: kernels_a}, rank=rank, parameters={0: {"w": w}, 1: {"w": w}})
    write_dump(b, {0: kernels_b, 1: kernels_b}, rank=rank,
               parameters={0: {"w": w_b}, 1: {"w": w_b}})


def graphdump(*args):
    """Runs the CLI ($GRAPHDUMP_BIN); returns the CompletedProcess (text stdout/stderr)."""
    import subprocess
    binary = os.environ.get('GRAPHDUMP_BIN', 'graphdump')
    return subprocess.run([binary] + [str(a) for a in args], capture_output=True, text=True)
