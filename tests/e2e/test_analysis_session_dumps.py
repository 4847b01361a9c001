"""The analysis CLI over dumps written by the real session (`graphdump demo-synthetic`, the
synthetic MLP) with faults planted at known kernels and iterations."""
import json
import os
import shutil
import tempfile
import unittest

import numpy as np

import analysis_dumps as d


def make_writable(path):
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o700)


class SessionDumpTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix='graphdump_analysis_')

    def tearDown(self):
        make_writable(self.root)
        shutil.rmtree(self.root, ignore_errors=True)

    def dump(self, name, *flags, saved_data='tensor'):
        path = os.path.join(self.root, name)
        config = os.path.join(self.root, name + '.json')
        with open(config, 'w') as f:
            json.dump({'common_dump_settings': {
                'dump_mode': 0, 'path': path, 'net_name': 'Net', 'iteration': 'all',
                'input_output': 0, 'kernels': [], 'support_device': [0],
                'saved_data': saved_data},
                'e2e_dump_settings': {'enable': True}}, f)
        p = d.graphdump('demo-synthetic', '--config', config, *flags)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return path

    def test_compare_and_watch(self):
        a = self.dump('a', '--steps', '3')
        b = self.dump('b', '--steps', '3')
        c = self.dump('c', '--steps', '3', '--perturb-kernel', '3', '--perturb', '0.25',
                      '--fault-iteration', '1')
        p = d.graphdump('compare', a, b, '-q')
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn('no kernel failed', p.stdout)
        csv_path = os.path.join(self.root, 'diff.csv')
        p = d.graphdump('compare', c, a, '-q', '--out', csv_path)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn('first divergence: Default/fc2-Dense/MatMul-op3 (rank 0, graph 0, '
                      'iteration 1) at synthetic_mlp.py:14', p.stdout)
        # the injected difference is exactly 0.25 on every element of that output
        import csv
        with open(csv_path) as f:
            rows = [r for r in csv.DictReader(f)
                    if r['kernel_a'] == 'Default/fc2-Dense/MatMul-op3' and r['iteration'] == '1'
                    and r['io'] == 'output']
        self.assertEqual(len(rows), 1)
        self.assertAlmostEqual(float(rows[0]['max_abs_err']), 0.25, places=6)
        self.assertAlmostEqual(float(rows[0]['rmse']), 0.25, places=6)
        x = np.load(rows[0]['path_a']).astype(np.float64)
        y = np.load(rows[0]['path_b']).astype(np.float64)
        cos = x.ravel().dot(y.ravel()) / np.linalg.norm(x) / np.linalg.norm(y)
        self.assertAlmostEqual(float(rows[0]['cosine']), cos, places=9)

        n = self.dump('n', '--steps', '4', '--nan-kernel', '2', '--fault-iteration', '2')
        self.assertEqual(d.graphdump('watch', a, '--check', 'nan,inf', '-q').returncode, 0)
        p = d.graphdump('watch', n, '--check', 'nan,inf', '-q', '--json')
        self.assertEqual(p.returncode, 1)
        first = json.loads(p.stdout)['first_hit']
        self.assertEqual((first['kernel'], first['iteration'], first['io'], first['check']),
                         ('Default/relu-ReLU/ReLU-op2', 2, 'output', 'nan'))
        self.assertEqual(first['source_line'], 'synthetic_mlp.py:13')

        p = d.graphdump('ls', a, '--json')
        j = json.loads(p.stdout)
        self.assertEqual(j['total']['iterations'], 3)
        self.assertEqual(j['skipped'], [])
        p = d.graphdump('trace', a, 'synthetic_mlp.py:13', '--json')
        self.assertEqual([m['kernel'] for m in json.loads(p.stdout)],
                         ['Default/relu-ReLU/ReLU-op2'])


if __name__ == '__main__':
    unittest.main()
