"""Bad input: missing and non-dump directories, truncated and corrupt .npy files, a malformed
statistic.csv. Messages name the file; compare and watch go on with the rest."""
import glob
import json
import os
import tempfile
import unittest

import analysis_dumps as d


class BadInputTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        self.net = d.simple_net(n=4)
        self.a = os.path.join(self.root, 'a')
        self.b = os.path.join(self.root, 'b')
        d.write_dump(self.a, {0: self.net})
        d.write_dump(self.b, {0: self.net})

    def tearDown(self):
        self.tmp.cleanup()

    def file_of(self, root, kernel_index, io='output'):
        name = d.file_kernel_name(self.net[kernel_index]['full_name'])
        [path] = glob.glob(os.path.join(root, 'rank_0', 'Net', '0', '0', '*%s*.%s.0.*' % (name, io)))
        return path

    def test_missing_and_non_dump_directories(self):
        missing = os.path.join(self.root, 'nope')
        for cmd in (['ls', missing], ['watch', missing], ['compare', missing, self.b],
                    ['trace', missing, 'x.py:1'], ['report', missing, '-o', 'r.html']):
            p = d.graphdump(*cmd)
            self.assertEqual(p.returncode, 2, cmd)
            self.assertIn(missing + ': no such directory', p.stderr)
        empty = os.path.join(self.root, 'empty')
        os.makedirs(empty)
        p = d.graphdump('ls', empty)
        self.assertEqual(p.returncode, 2)
        self.assertIn(empty + ': not a dump directory', p.stderr)
        self.assertIn('rank_{id}', p.stderr)
        p = d.graphdump('compare', self.a)
        self.assertEqual(p.returncode, 2)
        p = d.graphdump('compare', self.a, self.b, '--atol', 'abc')
        self.assertEqual(p.returncode, 2)

    def test_unwritable_output_paths_fail_first_and_keep_old_files(self):
        blocker = os.path.join(self.root, 'a_file')
        with open(blocker, 'w') as f:
            f.write('keep')
        two_ranks = os.path.join(self.root, 'ranks')
        for rank in (0, 1):
            d.write_dump(two_ranks, {0: self.net}, rank=rank)
        cases = [(['compare', self.a, self.b, '-q', '--out'], '--out'),
                 (['compare', two_ranks, '--ranks', '-q', '--out'], '--out'),
                 (['report', self.a, '-o'], '-o')]
        for cmd, option in cases:
            for target, why in ((os.path.join(blocker, 'x'), blocker + ' is not a directory'),
                                (os.path.join(self.root, 'no', 'x'), 'No such file or directory'),
                                (self.root, self.root + ' is a directory')):
                p = d.graphdump(*cmd, target)
                self.assertEqual(p.returncode, 2, (cmd, target, p.stderr))
                self.assertIn('error: %s %s: ' % (option, target), p.stderr)
                self.assertIn(why, p.stderr)
                self.assertEqual(p.stdout, '', cmd)  # refused before any work
        # A good path is written whole, replacing the old file; no temporary is left.
        for cmd, option in cases:
            target = os.path.join(self.root, 'out.txt')
            with open(target, 'w') as f:
                f.write('old')
            p = d.graphdump(*cmd, target)
            self.assertIn(p.returncode, (0, 1), (cmd, p.stderr))
            with open(target) as f:
                text = f.read()
            self.assertTrue(text.startswith('<!DOCTYPE html>' if cmd[0] == 'report' else 'rank'),
                            (cmd, text[:80]))
            self.assertEqual(sorted(os.listdir(self.root)), ['a', 'a_file', 'b', 'out.txt', 'ranks'])

    def test_iteration_that_is_not_dumped(self):
        p = d.graphdump('compare', self.a, self.b, '-q', '--iteration', '99')
        self.assertEqual(p.returncode, 2)  # nothing paired: not a pass (docs/analysis.md)
        self.assertIn('no kernel pairs: --iteration 99; A has iterations 0, B has 0', p.stderr)
        p = d.graphdump('compare', self.a, self.b, '-q', '--iteration', '-5')
        self.assertEqual(p.returncode, 2)
        self.assertIn('--iteration -5: iterations count from 0', p.stderr)
        p = d.graphdump('compare', self.a, self.b, '-q', '--iteration', '0')
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_truncated_npy_is_skipped_and_named(self):
        path = self.file_of(self.a, 2)
        with open(path, 'rb') as f:
            data = f.read()
        with open(path, 'wb') as f:
            f.write(data[:-20])
        p = d.graphdump('compare', self.a, self.b, '-q', '--json')
        self.assertEqual(p.returncode, 0)  # skipped files are reported, not failed
        j = json.loads(p.stdout)
        self.assertEqual(j['summary']['error'], 0)
        self.assertEqual(j['summary']['kernels'], 4)  # the others were compared
        [skipped] = j['skipped']
        self.assertEqual(skipped['path'], path)
        self.assertIn('truncated .npy: header promises 128 data bytes, file has 108',
                      skipped['reason'])
        self.assertIn('skipped 1 file(s)', p.stderr)
        self.assertIn(path, p.stderr)
        w = d.graphdump('watch', self.a, '-q')
        self.assertEqual(w.returncode, 0)  # no hit; the skipped file is listed on stderr
        self.assertIn('7 tensors checked', w.stdout)
        self.assertIn(path + ': truncated .npy', w.stderr)

    def test_corrupt_header_is_named(self):
        path = self.file_of(self.a, 1, 'input')
        with open(path, 'r+b') as f:
            f.seek(0)
            f.write(b'GARBAGE!')
        p = d.graphdump('watch', self.a, '-q', '--json')
        self.assertEqual(p.returncode, 0)
        [skipped] = json.loads(p.stdout)['skipped']
        self.assertEqual(skipped['path'], path)
        self.assertIn(path + ': not a valid .npy file: magic bytes are not \\x93NUMPY',
                      skipped['reason'])
        with open(path, 'r+b') as f:
            data = bytearray(f.read())
            data[0:8] = b'\x93NUMPY\x01\x00'
            data[10:30] = b"{'descr': '<U8', 'fo"
            f.seek(0)
            f.write(data)
        p = d.graphdump('compare', self.a, self.b, '-q')
        self.assertIn("not a valid .npy file: descr '<U8'", p.stderr)

    def test_malformed_statistic_csv_is_named(self):
        d.write_dump(self.a, {1: self.net}, files=False, stats=True)
        csv_path = os.path.join(self.a, 'rank_0', 'Net', '0', '1', 'statistic.csv')
        with open(csv_path, 'a') as f:
            f.write('Add,x,0,0,1,sideways,0,4,float32,"(1)",1,1,1,0,\n')
        p = d.graphdump('ls', self.a)
        self.assertEqual(p.returncode, 0)
        self.assertIn(csv_path + ':10: IO is \'sideways\' (expected input or output)', p.stderr)
        with open(csv_path, 'w') as f:
            f.write('hello,world\n1,2\n')
        p = d.graphdump('watch', self.a, '-q')
        self.assertIn(csv_path + ':1: malformed statistic.csv header', p.stderr)
        # iteration 0 was still checked
        self.assertIn('8 tensors checked', p.stdout)

    def test_unparsable_file_name_is_listed(self):
        open(os.path.join(self.a, 'rank_0', 'Net', '0', '0', 'random.npy'), 'w').close()
        p = d.graphdump('ls', self.a, '--json')
        [skipped] = json.loads(p.stdout)['skipped']
        self.assertTrue(skipped['path'].endswith('random.npy'))
        self.assertIn('file name does not follow', skipped['reason'])


if __name__ == '__main__':
    unittest.main()
