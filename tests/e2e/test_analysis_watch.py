"""graphdump watch: planted NaN found at the right kernel and iteration; clean dump passes."""
import copy
import json

import numpy as np

import analysis_dumps as d


def test_clean_dump_has_no_hits(scratch):
    net = d.simple_net()
    d.write_dump(scratch, {0: net, 1: net, 2: net})
    p = d.graphdump('watch', scratch, '--check', 'nan,inf,overflow,zero', '-q')
    assert p.returncode == 0, p.stdout + p.stderr
    assert '36 tensors checked, 0 hit(s)' in p.stdout


def test_planted_nan_is_the_first_hit(scratch):
    net = d.simple_net()
    bad = copy.deepcopy(net)
    out = bad[3]['outputs'][0].copy()
    out[0, 5] = np.nan
    bad[3]['outputs'] = [out]
    bad[4]['inputs'] = [out]  # the NaN flows on
    bad5 = bad[5]['outputs'][0].copy()
    bad5[0, 0] = np.inf
    bad[5]['outputs'] = [bad5]
    d.write_dump(scratch, {0: net, 1: net, 2: bad, 3: bad})
    p = d.graphdump('watch', scratch, '--check', 'nan,inf', '-q', '--json')
    assert p.returncode == 1, p.stdout + p.stderr
    j = json.loads(p.stdout)
    first = j['first_hit']
    assert first['kernel'] == net[3]['full_name']
    assert first['iteration'] == 2
    assert (first['io'], first['slot'], first['check']) == ('output', 0, 'nan')
    assert first['source_line'] == '/home/user/project/model.py:13'
    assert '1 NaN of 32 elements' in first['detail']
    hits = [(h['iteration'], h['kernel'], h['io'], h['check']) for h in j['hits']]
    assert hits[:4] == [(2, net[3]['full_name'], 'output', 'nan'),
                        (2, net[4]['full_name'], 'input', 'nan'),
                        (2, net[5]['full_name'], 'output', 'inf'),
                        (3, net[3]['full_name'], 'output', 'nan')]
    text = d.graphdump('watch', scratch, '--check', 'nan', '-q')
    assert 'first hit: ' + net[3]['full_name'] in text.stdout
    assert 'iteration 2' in text.stdout


def test_overflow_zero_and_large(scratch):
    net = d.simple_net(n=3)
    net[0]['outputs'] = [np.full((2, 2), 70000.0, np.float32)]
    net[1]['outputs'] = [np.zeros((3,), np.float32)]
    net[2]['outputs'] = [np.full((2,), 50.0, np.float32)]
    d.write_dump(scratch, {0: net})
    j = json.loads(d.graphdump('watch', scratch, '--check', 'overflow,zero,large:60',
                               '--json', '-q').stdout)
    got = {(h['kernel'], h['io'], h['check']) for h in j['hits']}
    assert (net[0]['full_name'], 'output', 'overflow') in got
    assert (net[0]['full_name'], 'output', 'large:60') in got
    assert (net[1]['full_name'], 'output', 'zero') in got
    assert (net[2]['full_name'], 'output', 'large:60') not in got


def test_gradients_and_weights(scratch):
    kernels = [
        {'full_name': 'Default/net-Net/fc-Linear/MatMul-op1',
         'outputs': [np.ones((4,), np.float32)]},
        {'full_name': 'Gradients/Default/net-Net/fc-Linear/MatMulBackward-op7',
         'outputs': [np.full((4,), 1e-10, np.float32)]},
        {'full_name': 'Gradients/Default/net-Net/fc2-Linear/MatMulBackward-op8',
         'outputs': [np.full((4,), 1e4, np.float32)]},
    ]
    w = np.ones((3, 3), np.float32)
    params = {0: {'fc_weight': w, 'fc_bias': np.zeros(3, np.float32)},
              1: {'fc_weight': w * 2, 'fc_bias': np.zeros(3, np.float32)}}
    d.write_dump(scratch, {0: kernels, 1: kernels}, parameters=params)
    j = json.loads(d.graphdump('watch', scratch, '--check',
                               'grad-vanish,grad-explode:100,weight-unchanged,weight-change:0.5',
                               '--json', '-q').stdout)
    got = {(h['iteration'], h['kernel'], h['check']) for h in j['hits']}
    assert (0, kernels[1]['full_name'], 'grad-vanish:1e-07') in got
    assert (0, kernels[2]['full_name'], 'grad-explode:100') in got
    assert (1, 'fc_bias', 'weight-unchanged') in got
    assert (1, 'fc_weight', 'weight-change:0.5') in got
    assert (1, 'fc_weight', 'weight-unchanged') not in got
    # the forward kernel is not a gradient, whatever its norm
    assert not any(k == kernels[0]['full_name'] for _, k, _ in got)


def test_bad_check_is_a_usage_error(scratch):
    d.write_dump(scratch, {0: d.simple_net(n=1)})
    p = d.graphdump('watch', scratch, '--check', 'nan,bogus')
    assert p.returncode == 2
    assert "unknown watchpoint 'bogus'" in p.stderr
    assert 'grad-vanish' in p.stderr
    p = d.graphdump('watch', scratch, '--check', 'nan:3')
    assert p.returncode == 2
    assert 'takes no threshold' in p.stderr
