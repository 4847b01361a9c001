"""The analysis CLI over dumps written by the real session (`graphdump demo-synthetic`, the
synthetic MLP) with faults planted at known kernels and iterations."""
import json
import os

import numpy as np

import analysis_dumps as d


def dump(scratch, name, *flags, saved_data='tensor'):
    path = os.path.join(scratch, name)
    config = os.path.join(scratch, name + '.json')
    with open(config, 'w') as f:
        json.dump({'common_dump_settings': {
            'dump_mode': 0, 'path': path, 'net_name': 'Net', 'iteration': 'all',
            'input_output': 0, 'kernels': [], 'support_device': [0],
            'saved_data': saved_data},
            'e2e_dump_settings': {'enable': True}}, f)
    p = d.graphdump('demo-synthetic', '--config', config, *flags)
    assert p.returncode == 0, p.stdout + p.stderr
    return path


def test_compare_and_watch(scratch):
    a = dump(scratch, 'a', '--steps', '3')
    b = dump(scratch, 'b', '--steps', '3')
    c = dump(scratch, 'c', '--steps', '3', '--perturb-kernel', '3', '--perturb', '0.25',
             '--fault-iteration', '1')
    p = d.graphdump('compare', a, b, '-q')
    assert p.returncode == 0, p.stdout + p.stderr
    assert 'no kernel failed' in p.stdout
    csv_path = os.path.join(scratch, 'diff.csv')
    p = d.graphdump('compare', c, a, '-q', '--out', csv_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert ('first divergence: Default/fc2-Dense/MatMul-op3 (rank 0, graph 0, '
            'iteration 1) at synthetic_mlp.py:14') in p.stdout
    # the injected difference is exactly 0.25 on every element of that output
    import csv
    with open(csv_path) as f:
        rows = [r for r in csv.DictReader(f)
                if r['kernel_a'] == 'Default/fc2-Dense/MatMul-op3' and r['iteration'] == '1'
                and r['io'] == 'output']
    assert len(rows) == 1
    assert round(abs(float(rows[0]['max_abs_err']) - 0.25), 6) == 0
    assert round(abs(float(rows[0]['rmse']) - 0.25), 6) == 0
    x = np.load(rows[0]['path_a']).astype(np.float64)
    y = np.load(rows[0]['path_b']).astype(np.float64)
    cos = x.ravel().dot(y.ravel()) / np.linalg.norm(x) / np.linalg.norm(y)
    assert round(abs(float(rows[0]['cosine']) - cos), 9) == 0

    n = dump(scratch, 'n', '--steps', '4', '--nan-kernel', '2', '--fault-iteration', '2')
    assert d.graphdump('watch', a, '--check', 'nan,inf', '-q').returncode == 0
    p = d.graphdump('watch', n, '--check', 'nan,inf', '-q', '--json')
    assert p.returncode == 1
    first = json.loads(p.stdout)['first_hit']
    assert (first['kernel'], first['iteration'], first['io'], first['check']) == \
        ('Default/relu-ReLU/ReLU-op2', 2, 'output', 'nan')
    assert first['source_line'] == 'synthetic_mlp.py:13'

    p = d.graphdump('ls', a, '--json')
    j = json.loads(p.stdout)
    assert j['total']['iterations'] == 3
    assert j['skipped'] == []
    p = d.graphdump('trace', a, 'synthetic_mlp.py:13', '--json')
    assert [m['kernel'] for m in json.loads(p.stdout)] == ['Default/relu-ReLU/ReLU-op2']
