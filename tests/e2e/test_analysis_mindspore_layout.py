"""A hand-made directory in MindSpore's own layout (CPU Float32 suffix, mapping.csv,
constants/, statistic.csv) is read by ls and compare; trace maps a line to kernels."""
import json
import os
import tempfile
import unittest

import numpy as np

import analysis_dumps as d


class MindSporeLayoutTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        self.net = d.simple_net(n=4)
        self.rank_dir = d.write_dump(os.path.join(self.root, 'ms'), {0: self.net, 1: self.net},
                                     cpu_suffix=True, long_names=True, stats=True,
                                     parameters={0: {'conv_weight': np.ones((2, 2), np.float32)}})
        const_dir = os.path.join(self.rank_dir, 'Net', '0', 'constants')
        os.makedirs(const_dir)
        np.save(os.path.join(const_dir,
                             'Parameter.data-1.0.0.1700000000000000.output.0.DefaultFormat.Float32.npy'),
                np.arange(3, dtype=np.float32))
        os.makedirs(os.path.join(self.rank_dir, '.dump_metadata'))
        d.write_dump(os.path.join(self.root, 'ref'), {0: self.net, 1: self.net})

    def tearDown(self):
        self.tmp.cleanup()

    def test_ls_reads_the_layout(self):
        p = d.graphdump('ls', os.path.join(self.root, 'ms'), '--json')
        self.assertEqual(p.returncode, 0, p.stderr)
        j = json.loads(p.stdout)
        self.assertEqual(j['skipped'], [])
        g = j['ranks'][0]['graphs'][0]
        self.assertEqual(g['net_name'], 'Net')
        self.assertEqual(g['execution_order_kernels'], 4)
        its = {str(i['iteration']): i for i in g['iterations']}
        self.assertEqual(sorted(its), ['0', '1', 'constants'])
        self.assertEqual(its['0']['kernels'], 5)       # 4 kernels + 1 parameter
        self.assertEqual(its['0']['tensors'], 9)
        self.assertEqual(its['0']['files'], 9)
        self.assertEqual(its['constants']['files'], 1)
        self.assertEqual(j['total']['iterations'], 2)
        text = d.graphdump('ls', self.rank_dir, '--kernels')
        self.assertEqual(text.returncode, 0)
        self.assertIn('Float32', text.stdout)
        self.assertIn('123456.npy', text.stdout)   # the mapped (long-name) file is listed
        self.assertIn(self.net[0]['full_name'], text.stdout)

    def test_mapping_csv_restores_the_kernel(self):
        j = json.loads(d.graphdump('ls', self.rank_dir, '--json', '--kernels').stdout)
        it0 = j['ranks'][0]['graphs'][0]['iterations'][0]
        names = {k['full_name']: k['files'] for k in it0['kernel_list']}
        self.assertTrue(any(f.endswith('123456.npy') for f in names[self.net[0]['full_name']]))

    def test_compare_against_graphdump_layout(self):
        p = d.graphdump('compare', os.path.join(self.root, 'ms'), os.path.join(self.root, 'ref'),
                        '--json', '-q')
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        j = json.loads(p.stdout)
        self.assertEqual(j['summary']['error'], 0)
        self.assertEqual(j['summary']['kernels'], 8)
        # the Parameter exists only in the MindSpore dump
        self.assertEqual([u['kernel'] for u in j['unpaired']], ['conv_weight'])
        self.assertEqual(j['kernels'][0]['tensors'][0]['dtype_a'], 'float32')

    def test_trace_maps_a_line_to_kernels_and_files(self):
        p = d.graphdump('trace', self.rank_dir, 'model.py:12', '--json')
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        j = json.loads(p.stdout)
        self.assertEqual([m['kernel'] for m in j], [self.net[2]['full_name']])
        self.assertEqual(j[0]['code'], 'x = self.layer2(x)')
        self.assertEqual(sorted({f['iteration'] for f in j[0]['files']}), [0, 1])
        self.assertEqual(len(j[0]['files']), 4)
        for f in j[0]['files']:
            self.assertTrue(os.path.exists(f['path']), f['path'])
        # a path suffix works too, a wrong directory does not
        self.assertEqual(d.graphdump('trace', self.rank_dir, 'project/model.py:12').returncode, 0)
        miss = d.graphdump('trace', self.rank_dir, 'other/model.py:12')
        self.assertEqual(miss.returncode, 1)
        self.assertIn('no kernel', miss.stdout)
        # frames further out in the trace count too
        frames = json.loads(d.graphdump('trace', self.rank_dir, 'module.py:1190', '--json').stdout)
        self.assertEqual(len(frames), 4)
        self.assertEqual(d.graphdump('trace', self.rank_dir, 'model.py').returncode, 2)


if __name__ == '__main__':
    unittest.main()
