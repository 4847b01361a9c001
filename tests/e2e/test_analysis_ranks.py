"""Cross-rank analysis in the CLI: `graphdump compare DIR --ranks` and `graphdump watch DIR` over a
two-rank dump. demo-synthetic always dumps rank 0, so rank_1 is a second run's rank_0 moved into
the first run's root (the index reads the rank from the directory name)."""
import csv
import json
import os
import shutil
import tempfile
import unittest

import analysis_dumps as d

OPTIMIZER = 'Default/optimizer-SGD/ApplyGradientDescent-op8'


class RanksTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix='graphdump_ranks_')

    def tearDown(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def run_demo(self, name, flags):
        path = os.path.join(self.root, name)
        config = path + '.json'
        with open(config, 'w') as f:
            json.dump({'common_dump_settings': {
                'dump_mode': 0, 'path': path, 'net_name': 'Net', 'iteration': 'all',
                'input_output': 0, 'kernels': [], 'support_device': [0],
                'saved_data': 'tensor'},
                'e2e_dump_settings': {'enable': True}}, f)
        p = d.graphdump('demo-synthetic', '--config', config, '--steps', '3', *flags)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return path

    def two_ranks(self, name, rank0_flags, rank1_flags):
        root = self.run_demo(name, rank0_flags)
        other = self.run_demo(name + '_r1', rank1_flags)
        os.rename(os.path.join(other, 'rank_0'), os.path.join(root, 'rank_1'))
        return root

    def test_identical_ranks_agree(self):
        root = self.two_ranks('same', [], [])
        p = d.graphdump('compare', root, '--ranks', '-q')
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn('reference rank 0, compared rank(s) 1', p.stdout)
        self.assertIn('all ranks agree', p.stdout)
        p = d.graphdump('compare', root, '--ranks=0,1', '-q', '--json')
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        j = json.loads(p.stdout)
        self.assertEqual(j['summary']['error'], 0)
        self.assertEqual(j['compared_ranks'], [1])
        self.assertIsNone(j['first_failure'])
        # parameters (4 per iteration) and the optimizer output (1 per iteration), 3 iterations
        self.assertEqual(j['summary']['kernels'], 3 * 5 + 1)  # + the constant

    def test_planted_difference_is_the_first_disagreement(self):
        root = self.two_ranks('diff', [], ['--perturb-kernel', '8', '--perturb', '0.25',
                                           '--fault-iteration', '1'])
        out = os.path.join(self.root, 'ranks.csv')
        p = d.graphdump('compare', root, '--ranks', '-q', '--out', out)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn('first disagreement: iteration 1, ' + OPTIMIZER +
                      ' (graph 0), rank 1 vs rank 0, max abs err 0.25', p.stdout)
        with open(out) as f:
            rows = list(csv.DictReader(f))
        errors = {(r['iteration'], r['kernel_a']) for r in rows if r['verdict'] == 'error'}
        self.assertIn(('1', OPTIMIZER), errors)
        self.assertIn(('2', OPTIMIZER), errors)
        self.assertTrue(any(it == '2' and 'fc2' in k and 'weight' in k for it, k in errors),
                        errors)
        self.assertFalse(any(it == '0' for it, _ in errors), errors)
        self.assertTrue(all(r['io'] == 'output' for r in rows))
        self.assertTrue(all(r['rank'] == '1' for r in rows))

    def test_usage_errors(self):
        root = self.two_ranks('usage', [], [])
        p = d.graphdump('compare', root, '--ranks=0,5', '-q')
        self.assertEqual(p.returncode, 2)
        self.assertIn('rank 5 is not in', p.stderr)
        self.assertIn('ranks found: 0, 1', p.stderr)
        p = d.graphdump('compare', root, '--ranks=0,x', '-q')
        self.assertEqual(p.returncode, 2)
        self.assertIn("--ranks '0,x'", p.stderr)
        p = d.graphdump('compare', root, root, '--ranks', '-q')
        self.assertEqual(p.returncode, 2)
        p = d.graphdump('compare', root, '-q')
        self.assertEqual(p.returncode, 2)
        self.assertIn('B is required', p.stderr)

    def test_watch_names_the_rank_that_hit_first(self):
        root = self.two_ranks('nan', ['--nan-kernel', '3', '--fault-iteration', '2'],
                              ['--nan-kernel', '4', '--fault-iteration', '1'])
        p = d.graphdump('watch', root, '--check', 'nan', '-q')
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn('first hit per rank (2 of 2 ranks hit):\n'
                      '  rank 1: it 1 #4 Default/fc2-Dense/BiasAdd-op4 output 0', p.stdout)
        self.assertIn('  rank 0: it 2 #3 Default/fc2-Dense/MatMul-op3 output 0', p.stdout)
        self.assertIn('first rank to hit: rank 1; first hit: Default/fc2-Dense/BiasAdd-op4 '
                      '(rank 1, graph 0, iteration 1', p.stdout)
        p = d.graphdump('watch', root, '--check', 'nan', '-q', '--json')
        j = json.loads(p.stdout)
        self.assertEqual(j['first_rank'], 1)
        self.assertEqual([h['rank'] for h in j['first_hit_per_rank']], [1, 0])
        # a single rank keeps the single-rank output
        p = d.graphdump('watch', os.path.join(root, 'rank_0'), '--check', 'nan', '-q')
        self.assertEqual(p.returncode, 1)
        self.assertNotIn('per rank', p.stdout)
        self.assertIn('first hit: Default/fc2-Dense/MatMul-op3 (rank 0, graph 0, iteration 2',
                      p.stdout)


if __name__ == '__main__':
    unittest.main()
