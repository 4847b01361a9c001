"""Cross-rank analysis in the CLI: `graphdump compare DIR --ranks` and `graphdump watch DIR` over a
two-rank dump. demo-synthetic always dumps rank 0, so rank_1 is a second run's rank_0 moved into
the first run's root (the index reads the rank from the directory name)."""
import csv
import json
import os

import analysis_dumps as d

OPTIMIZER = 'Default/optimizer-SGD/ApplyGradientDescent-op8'


def run_demo(scratch, name, flags):
    path = os.path.join(scratch, name)
    config = path + '.json'
    with open(config, 'w') as f:
        json.dump({'common_dump_settings': {
            'dump_mode': 0, 'path': path, 'net_name': 'Net', 'iteration': 'all',
            'input_output': 0, 'kernels': [], 'support_device': [0],
            'saved_data': 'tensor'},
            'e2e_dump_settings': {'enable': True}}, f)
    p = d.graphdump('demo-synthetic', '--config', config, '--steps', '3', *flags)
    assert p.returncode == 0, p.stdout + p.stderr
    return path


def two_ranks(scratch, name, rank0_flags, rank1_flags):
    root = run_demo(scratch, name, rank0_flags)
    other = run_demo(scratch, name + '_r1', rank1_flags)
    os.rename(os.path.join(other, 'rank_0'), os.path.join(root, 'rank_1'))
    return root


def test_identical_ranks_agree(scratch):
    root = two_ranks(scratch, 'same', [], [])
    p = d.graphdump('compare', root, '--ranks', '-q')
    assert p.returncode == 0, p.stdout + p.stderr
    assert 'reference rank 0, compared rank(s) 1' in p.stdout
    assert 'all ranks agree' in p.stdout
    p = d.graphdump('compare', root, '--ranks=0,1', '-q', '--json')
    assert p.returncode == 0, p.stdout + p.stderr
    j = json.loads(p.stdout)
    assert j['summary']['error'] == 0
    assert j['compared_ranks'] == [1]
    assert j['first_failure'] is None
    # parameters (4 per iteration) and the optimizer output (1 per iteration), 3 iterations
    assert j['summary']['kernels'] == 3 * 5 + 1  # + the constant


def test_planted_difference_is_the_first_disagreement(scratch):
    root = two_ranks(scratch, 'diff', [], ['--perturb-kernel', '8', '--perturb', '0.25',
                                           '--fault-iteration', '1'])
    out = os.path.join(scratch, 'ranks.csv')
    p = d.graphdump('compare', root, '--ranks', '-q', '--out', out)
    assert p.returncode == 1, p.stdout + p.stderr
    assert ('first disagreement: iteration 1, ' + OPTIMIZER +
            ' (graph 0), rank 1 vs rank 0, max abs err 0.25') in p.stdout
    with open(out) as f:
        rows = list(csv.DictReader(f))
    errors = {(r['iteration'], r['kernel_a']) for r in rows if r['verdict'] == 'error'}
    assert ('1', OPTIMIZER) in errors
    assert ('2', OPTIMIZER) in errors
    assert any(it == '2' and 'fc2' in k and 'weight' in k for it, k in errors), errors
    assert not any(it == '0' for it, _ in errors), errors
    assert all(r['io'] == 'output' for r in rows)
    assert all(r['rank'] == '1' for r in rows)


def test_usage_errors(scratch):
    root = two_ranks(scratch, 'usage', [], [])
    p = d.graphdump('compare', root, '--ranks=0,5', '-q')
    assert p.returncode == 2
    assert 'rank 5 is not in' in p.stderr
    assert 'ranks found: 0, 1' in p.stderr
    p = d.graphdump('compare', root, '--ranks=0,x', '-q')
    assert p.returncode == 2
    assert "--ranks '0,x'" in p.stderr
    p = d.graphdump('compare', root, root, '--ranks', '-q')
    assert p.returncode == 2
    p = d.graphdump('compare', root, '-q')
    assert p.returncode == 2
    assert 'B is required' in p.stderr


def test_watch_names_the_rank_that_hit_first(scratch):
    root = two_ranks(scratch, 'nan', ['--nan-kernel', '3', '--fault-iteration', '2'],
                     ['--nan-kernel', '4', '--fault-iteration', '1'])
    p = d.graphdump('watch', root, '--check', 'nan', '-q')
    assert p.returncode == 1, p.stdout + p.stderr
    assert ('first hit per rank (2 of 2 ranks hit):\n'
            '  rank 1: it 1 #4 Default/fc2-Dense/BiasAdd-op4 output 0') in p.stdout
    assert '  rank 0: it 2 #3 Default/fc2-Dense/MatMul-op3 output 0' in p.stdout
    assert ('first rank to hit: rank 1; first hit: Default/fc2-Dense/BiasAdd-op4 '
            '(rank 1, graph 0, iteration 1') in p.stdout
    p = d.graphdump('watch', root, '--check', 'nan', '-q', '--json')
    j = json.loads(p.stdout)
    assert j['first_rank'] == 1
    assert [h['rank'] for h in j['first_hit_per_rank']] == [1, 0]
    # a single rank keeps the single-rank output
    p = d.graphdump('watch', os.path.join(root, 'rank_0'), '--check', 'nan', '-q')
    assert p.returncode == 1
    assert 'per rank' not in p.stdout
    assert 'first hit: Default/fc2-Dense/MatMul-op3 (rank 0, graph 0, iteration 2' in p.stdout
