"""graphdump compare on dumps with known differences; metrics checked against NumPy."""
import copy
import csv
import json
import os

import numpy as np

import analysis_dumps as d

EPS = np.finfo(float).eps
# The float32 standard of docs/precision.md: |a-b| <= rtol*max(|b|, small).
FP32_RTOL, FP32_SMALL = 2.0 ** -20, 2.0 ** -14


def numpy_metrics(a, b, atol=0.0, rtol=FP32_RTOL, small=FP32_SMALL):
    """compare's metrics; the defaults are the float32 standard, small=0 gives --atol/--rtol."""
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    diff = np.abs(a - b)
    floored = np.maximum(np.abs(b), small)
    rel = diff / (floored + EPS)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    cos = 1.0 if na == 0 and nb == 0 else (0.0 if na == 0 or nb == 0 else a.dot(b) / (na * nb))
    return {'cosine': cos, 'max_abs_err': diff.max(), 'max_rel_err': rel.max(),
            'rmse': np.sqrt((diff ** 2).mean()), 'rel_err_below_0.1pct': (rel < 0.001).mean(),
            'rel_err_below_0.5pct': (rel < 0.005).mean(),
            'norm_rel_err': np.linalg.norm(a - b) / max(nb, small * np.sqrt(b.size)),
            'allclose_failures': int((diff > atol + rtol * floored).sum())}


def test_identical_dumps_pass(path):
    net = d.simple_net()
    d.write_dump(path('a'), {0: net, 1: net})
    d.write_dump(path('b'), {0: net, 1: net})
    p = d.graphdump('compare', path('a'), path('b'), '--json', '-q')
    assert p.returncode == 0, p.stdout + p.stderr
    j = json.loads(p.stdout)
    assert j['summary']['kernels'] == 12
    assert j['summary']['pass'] == 12
    assert j['summary']['error'] == 0
    assert j['first_failure'] is None
    for k in j['kernels']:
        for t in k['tensors']:
            assert t['metrics']['cosine'] == 1.0
            assert t['metrics']['max_abs_err'] == 0.0


def test_injected_kernel_is_first_divergence(path):
    net = d.simple_net(n=8)
    bad = copy.deepcopy(net)
    rng = np.random.default_rng(5)
    # Kernel 4 goes wrong; everything after it inherits the error.
    for i in range(4, 8):
        out = bad[i]['outputs'][0]
        bad[i]['outputs'] = [out + rng.standard_normal(out.shape).astype(np.float32) * 0.05]
        if i + 1 < 8:
            bad[i + 1]['inputs'] = [bad[i]['outputs'][0]]
    d.write_dump(path('a'), {0: bad})
    d.write_dump(path('b'), {0: net})
    out_csv = path('result.csv')
    p = d.graphdump('compare', path('a'), path('b'), '--out', out_csv, '-q')
    assert p.returncode == 1, p.stdout + p.stderr
    assert 'first divergence: ' + net[4]['full_name'] in p.stdout
    assert 'model.py:14' in p.stdout
    p = d.graphdump('compare', path('a'), path('b'), '--json', '-q')
    j = json.loads(p.stdout)
    assert j['first_failure']['kernel'] == net[4]['full_name']
    assert j['first_failure']['source_line'] == '/home/user/project/model.py:14'
    # The whole trace rides along: the user's frame, then the outer (torch) frame.
    frames = [(f['file'], f['line']) for f in j['first_failure']['source_trace']]
    assert frames == [('/home/user/project/model.py', 14),
                      ('/usr/lib/python3/torch/nn/modules/module.py', 1190)]
    failing = [k for k in j['kernels'] if k['kernel_a'] == j['first_failure']['kernel']]
    assert failing[0]['source_trace'] == j['first_failure']['source_trace']
    # Kernel 4 adds the error; 5-7 add noise of the same size to what they receive: they
    # inherit (growth ~1.4 < 10), a warning, not an error (docs/precision.md).
    verdicts = [k['verdict'] for k in j['kernels']]
    assert verdicts == ['pass'] * 4 + ['error'] + ['warning'] * 3
    assert [k['adds_error'] for k in j['kernels']] == [False] * 4 + [True] + [False] * 3
    assert all('inherits error' in k['reason'] for k in j['kernels'][5:])
    assert [c['kernel'] for c in j['contributors']] == [net[4]['full_name']]
    assert j['first_adding_error']['kernel'] == net[4]['full_name']
    assert j['kernels'][4]['input_error'] == 0.0
    assert j['kernels'][4]['growth'] > 1e4
    for k in j['kernels'][5:]:
        assert k['growth'] < 10
        assert abs(k['growth'] - k['output_error'] / k['input_error']) <= 1e-9

    # Every metric in the CSV matches NumPy on the same tensors.
    with open(out_csv) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 16
    for row in rows:
        a = np.load(row['path_a'])
        b = np.load(row['path_b'])
        expected = numpy_metrics(a, b)
        for key, value in expected.items():
            assert abs(float(row[key]) - value) <= 1e-9 + 1e-6 * abs(value), \
                '%s %s' % (key, row['path_a'])
        assert row['elements'] == str(a.size)


def test_tolerances_turn_errors_into_passes(path):
    net = d.simple_net()
    noisy = copy.deepcopy(net)
    noisy[2]['outputs'] = [net[2]['outputs'][0] * (1 + 1e-4)]
    d.write_dump(path('a'), {0: noisy})
    d.write_dump(path('b'), {0: net})
    assert d.graphdump('compare', path('a'), path('b'), '-q').returncode == 1
    p = d.graphdump('compare', path('a'), path('b'), '--rtol', '1e-3', '-q')
    assert p.returncode == 0, p.stdout


def test_name_fallback_pairs_kernels_whose_op_ids_differ(path):
    net = d.simple_net(op_ids=[0, 1, 2, 3, 4, 5])
    renumbered = d.simple_net(op_ids=[10, 12, 14, 16, 18, 20])
    other_scope = d.simple_net(scope='Default/model-Other')
    d.write_dump(path('a'), {0: net})
    d.write_dump(path('b'), {0: renumbered})
    d.write_dump(path('c'), {0: other_scope})
    p = d.graphdump('compare', path('a'), path('b'), '--json', '-q')
    assert p.returncode == 0, p.stdout + p.stderr
    j = json.loads(p.stdout)
    assert j['summary']['unpaired'] == 0
    assert {k['pairing'] for k in j['kernels']} == {'name-without-op-id'}
    assert j['kernels'][3]['kernel_b'] == renumbered[3]['full_name']
    p = d.graphdump('compare', path('a'), path('c'), '--json', '-q')
    assert p.returncode == 0, p.stdout + p.stderr
    j = json.loads(p.stdout)
    assert {k['pairing'] for k in j['kernels']} == {'execution-order'}
    assert [k['kernel_b'] for k in j['kernels']] == [k['full_name'] for k in other_scope]


def test_unpaired_kernels_are_reported(path):
    net = d.simple_net()
    d.write_dump(path('a'), {0: net})
    d.write_dump(path('b'), {0: net[:4]})
    p = d.graphdump('compare', path('a'), path('b'), '--json', '-q')
    j = json.loads(p.stdout)
    assert sorted(u['kernel'] for u in j['unpaired']) == sorted(k['full_name'] for k in net[4:])
    assert all(u['side'] == 'A' for u in j['unpaired'])


def test_dtype_shape_and_nan_mismatches(path):
    net = d.simple_net(n=3)
    other = copy.deepcopy(net)
    other[0]['outputs'] = [net[0]['outputs'][0].astype(np.float16)]      # dtype differs
    other[1]['outputs'] = [net[1]['outputs'][0].reshape(8, 4)]           # shape differs
    with_nan = net[2]['outputs'][0].copy()
    with_nan[1, 2] = np.nan
    other[2]['outputs'] = [with_nan]                                      # NaN planted
    d.write_dump(path('a'), {0: other})
    d.write_dump(path('b'), {0: net})
    p = d.graphdump('compare', path('a'), path('b'), '--json', '-q',
                    '--rtol', '1e-3')
    assert p.returncode == 1
    j = json.loads(p.stdout)
    k0, k1, k2 = j['kernels']
    out0 = k0['tensors'][1]
    assert (out0['dtype_a'], out0['dtype_b']) == ('float16', 'float32')
    # Floating dtypes that differ are what a precision comparison is about: no warning.
    assert out0['verdict'] == 'pass'
    assert out0['reason'] == ''
    assert out0['standard'] == 'user'
    expected = numpy_metrics(net[0]['outputs'][0].astype(np.float16), net[0]['outputs'][0],
                             atol=1e-8, rtol=1e-3, small=0)
    assert abs(out0['metrics']['max_abs_err'] - expected['max_abs_err']) <= 1e-12
    assert k1['verdict'] == 'error'
    assert 'shape (8,4) vs (4,8)' in k1['reason']
    assert k2['verdict'] == 'error'
    m = k2['tensors'][1]['metrics']
    assert (m['nan_a'], m['nan_b'], m['nonfinite_mismatches']) == (1, 0, 1)
    # The NaN planted at [1, 2]: its index in the shape, its row and the flat index.
    assert 'first at [1, 2] (row 1, flat index 10)' in k2['reason']
    assert k2['tensors'][1]['first_index'] == [1, 2]
    assert j['first_failure']['kernel'] == net[1]['full_name']


def test_fortran_order(path):
    net = d.simple_net(n=2)
    d.write_dump(path('a'), {0: net})
    d.write_dump(path('b'), {0: net})
    d.write_dump(path('c'), {0: net})
    import glob
    for root in ('a', 'b'):
        for f in glob.glob(os.path.join(path(root), '**', '*output.0*.npy'),
                           recursive=True):
            np.save(f, np.asfortranarray(np.load(f)))
    # both Fortran: compared element for element, equal
    p = d.graphdump('compare', path('a'), path('b'), '--json', '-q')
    assert p.returncode == 0, p.stdout
    # Fortran against C order: not compared, said so
    p = d.graphdump('compare', path('a'), path('c'), '--json', '-q')
    j = json.loads(p.stdout)
    assert j['kernels'][0]['verdict'] == 'warning'
    assert 'fortran_order differs (A True, B False)' in j['kernels'][0]['reason']


def test_statistic_only_sides_compare_statistics(path):
    net = d.simple_net(n=3)
    other = copy.deepcopy(net)
    other[1]['outputs'] = [net[1]['outputs'][0] * 2]
    d.write_dump(path('a'), {0: other}, files=False, stats=True)
    d.write_dump(path('b'), {0: net}, files=True, stats=False)
    p = d.graphdump('compare', path('a'), path('b'), '--json', '-q', '--rtol', '1e-4')
    j = json.loads(p.stdout)
    assert p.returncode == 1, p.stdout
    assert [k['verdict'] for k in j['kernels']] == ['pass', 'error', 'pass']
    assert j['kernels'][1]['tensors'][1]['mode'] == 'statistic'
    assert 'Max Value' in j['kernels'][1]['reason']


def test_iteration_option(path):
    net = d.simple_net(n=2)
    bad = copy.deepcopy(net)
    bad[1]['outputs'] = [net[1]['outputs'][0] + 1]
    d.write_dump(path('a'), {0: net, 1: bad})
    d.write_dump(path('b'), {0: net, 1: net})
    assert d.graphdump('compare', path('a'), path('b'), '--iteration', '0',
                       '-q').returncode == 0
    p = d.graphdump('compare', path('a'), path('b'), '--iteration', '1', '-q')
    assert p.returncode == 1
    assert 'iteration 1' in p.stdout
    # nothing in common: a usage error, not a silent pass
    p = d.graphdump('compare', path('a'), path('b'), '--iteration', '7', '-q')
    assert p.returncode == 2
    assert 'no kernel pairs' in p.stderr
