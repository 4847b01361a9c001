"""Exit statuses a CI can gate on (docs/analysis.md): compare exits 1 only when a kernel adds
error; parameters and graph inputs that differ (a bfloat16 training against float32) and kernels
that only inherit error are reported without failing. watch exits 1 only on hits."""
import json
import os

import numpy as np

import analysis_dumps as d

# Beyond the float32 standard, within the bfloat16 one: 2^-8 relative.
BF16_STEP = 2.0 ** -10


def training(path, name, net, weight):
    d.write_dump(path(name), {0: net, 1: net},
                 parameters={0: {'fc_weight': weight}, 1: {'fc_weight': weight * 0.5}})


def test_bf16_training_within_its_standard_passes(path):
    ref = d.simple_net(n=4)
    weight = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    training(path, 'fp32', ref, weight)
    # The bf16 run: parameters updated in bf16 differ beyond float32's standard; the graph
    # input differs by a bf16 rounding, which every kernel passes on without adding to it.
    bf16 = []
    for k in ref:
        bf16.append(dict(k, inputs=[x * (1 + BF16_STEP) for x in k['inputs']],
                         outputs=[y * (1 + BF16_STEP) for y in k['outputs']]))
    training(path, 'bf16', bf16, weight * (1 + 4 * BF16_STEP))
    p = d.graphdump('compare', path('bf16'), path('fp32'), '--json', '-q')
    result = json.loads(p.stdout)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr
    assert result['first_adding_error'] is None
    assert [s['kernel'] for s in result['differing_sources']] == ['fc_weight', 'fc_weight']
    assert result['differing_graph_inputs']
    assert all('inherits error' in k['reason']
               for k in result['kernels'] if k['role'] == 'operator')
    text = d.graphdump('compare', path('bf16'), path('fp32'), '-q')
    assert text.returncode == 0
    assert 'no kernel adds error' in text.stdout
    assert 'sources that differ' in text.stdout

    # A kernel that adds error fails the comparison.
    broken = [dict(k) for k in ref]
    broken[2] = dict(ref[2], outputs=[ref[2]['outputs'][0] * 1.5])
    training(path, 'broken', broken, weight)
    p = d.graphdump('compare', path('broken'), path('fp32'), '--json', '-q')
    assert p.returncode == 1
    assert json.loads(p.stdout)['first_adding_error']['kernel'] == ref[2]['full_name']


def test_skipped_files_and_nothing_to_pair(path):
    net = d.simple_net(n=3)
    d.write_dump(path('a'), {0: net})
    d.write_dump(path('b'), {0: net})
    victim = sorted(f for f in os.listdir(os.path.join(path('a'), 'rank_0', 'Net', '0',
                                                       '0')) if f.endswith('.npy'))[0]
    with open(os.path.join(path('a'), 'rank_0', 'Net', '0', '0', victim), 'r+b') as f:
        f.truncate(40)
    p = d.graphdump('compare', path('a'), path('b'), '-q')
    assert p.returncode == 0, p.stdout + p.stderr
    assert 'skipped 1 file(s)' in p.stderr
    w = d.graphdump('watch', path('a'), '-q')
    assert w.returncode == 0, w.stdout + w.stderr
    assert 'skipped 1 file(s)' in w.stderr
    # Nothing in common is no pass: a usage error naming the iterations.
    p = d.graphdump('compare', path('a'), path('b'), '--iteration', '7', '-q')
    assert p.returncode == 2
    assert 'no kernel pairs: --iteration 7; A has iterations 0, B has 0' in p.stderr
