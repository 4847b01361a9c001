"""Distributed analysis: `graphdump watch` and `graphdump compare --ranks` as one job of 4
processes on torch.distributed (gloo) print exactly what one process prints (text, --json and the
exit status), with --nproc 4 on a shared directory and with 4 processes started the way torchrun
starts them, on two "nodes" whose disks each hold some of the ranks."""
import copy
import os
import shutil
import socket
import subprocess
import unittest

import numpy as np

import analysis_dumps as d

RANKS = 6


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def write_ranks(root, ranks):
    """Rank r of a data-parallel job: the same net, parameters and all-reduce output on every
    rank, except rank 4 (a NaN in iteration 1, the first hit), rank 1 (an Inf in iteration 2)
    and rank 3 (its weight and all-reduce output off by 1e-3: the ranks disagree)."""
    net = d.simple_net(n=5)
    net.append({'full_name': 'Default/allreduce-DataParallel/w/AllReduce-op9',
                'outputs': [np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)]})
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    for r in ranks:
        its = {it: copy.deepcopy(net) for it in range(3)}
        weights = {it: {'fc_weight': w.copy()} for it in range(3)}
        if r == 4:
            its[1][2]['outputs'][0][1, 1] = np.nan
        if r == 1:
            its[2][3]['outputs'][0][0, 2] = np.inf
        if r == 3:
            its[1][5]['outputs'][0][0, 0] += 1e-3
            weights[2]['fc_weight'][2, 2] += 1e-3
        d.write_dump(root, its, rank=r, parameters=weights, clock=1700000000000000 + 1000 * r)


class DistributedAnalysisTest(d.ScratchTest):
    def setUp(self):
        super().setUp()
        self.all = self.path('all')
        write_ranks(os.path.join(self.all, 'dump'), range(RANKS))

    def single(self, *args):
        return subprocess.run([os.environ.get('GRAPHDUMP_BIN', 'graphdump')] + list(args),
                              capture_output=True, text=True, cwd=self.all)

    def assert_same(self, single, job):
        self.assertEqual(job.stdout, single.stdout, job.stderr)
        self.assertEqual(job.returncode, single.returncode, job.stderr)
        self.assertTrue(single.stdout.strip())

    def test_nproc(self):
        """--nproc 4 over one directory: ranks go round-robin to the processes."""
        for args in (['watch', 'dump', '--check', 'nan,inf'],
                     ['watch', 'dump', '--check', 'nan,inf', '--json'],
                     ['watch', 'dump', '--check', 'nan,inf', '--first'],
                     ['compare', 'dump', '--ranks'],
                     ['compare', 'dump', '--ranks', '--json'],
                     ['compare', 'dump', '--ranks=5,3,1', '--json']):
            single = self.single(*args)
            job = self.single(*args, '--nproc', '4')
            self.assert_same(single, job)
        single = self.single('watch', 'dump', '--check', 'nan,inf')
        self.assertEqual(single.returncode, 1)
        self.assertIn('first rank to hit: rank 4', single.stdout)
        ranks = self.single('compare', 'dump', '--ranks')
        self.assertIn('rank 3 vs rank 0', ranks.stdout)
        # Usage errors are one process's.
        p = self.single('compare', 'dump', '--ranks=0,9', '--nproc', '2')
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stderr.count('--ranks: rank 9 is not in dump (ranks found: '
                                        '0, 1, 2, 3, 4, 5)'), 1, p.stderr)
        p = self.single('compare', 'dump', self.all, '--nproc', '2')
        self.assertEqual(p.returncode, 2)
        self.assertIn('--nproc runs compare --ranks only', p.stderr)

    def test_node_local_disks(self):
        """Four processes started as torchrun starts them, two per "node": node a's disk holds
        ranks 0-2, node b's ranks 3-5 and a copy of rank 0 (the reference of compare --ranks).
        Each process reads only the directories its node holds; process 0's output is the
        single-process output over all six ranks."""
        nodes = {'a': [0, 1, 2], 'b': [3, 4, 5]}
        for node, ranks in nodes.items():
            os.makedirs(self.path(node))
            for r in ranks:
                shutil.copytree(os.path.join(self.all, 'dump', 'rank_%d' % r),
                                self.path('%s/dump/rank_%d' % (node, r)))
        shutil.copytree(os.path.join(self.all, 'dump', 'rank_0'), self.path('b/dump/rank_0'))
        for args in (['watch', 'dump', '--check', 'nan,inf,overflow', '--json'],
                     ['watch', 'dump'],
                     ['compare', 'dump', '--ranks'],
                     ['compare', 'dump', '--ranks', '--json']):
            port = str(free_port())
            procs = []
            for rank in range(4):
                env = dict(os.environ, RANK=str(rank), WORLD_SIZE='4', LOCAL_RANK=str(rank % 2),
                           MASTER_ADDR='127.0.0.1', MASTER_PORT=port)
                procs.append(subprocess.Popen(
                    [os.environ.get('GRAPHDUMP_BIN', 'graphdump')] + args, env=env,
                    cwd=self.path('a' if rank < 2 else 'b'), stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True))
            outs = [p.communicate(timeout=300) for p in procs]
            single = self.single(*args)
            self.assertEqual(outs[0][0], single.stdout, outs[0][1])
            self.assertEqual(procs[0].returncode, single.returncode, outs[0][1])
            for p, (out, err) in zip(procs[1:], outs[1:]):
                self.assertEqual(out, '')
                self.assertEqual(p.returncode, 0, err)
        # Without the reference on node b, its ranks cannot be compared: one clear error.
        shutil.rmtree(self.path('b/dump/rank_0'))
        port = str(free_port())
        procs = [subprocess.Popen([os.environ.get('GRAPHDUMP_BIN', 'graphdump'), 'compare', 'dump',
                                   '--ranks'],
                                  env=dict(os.environ, RANK=str(rank), WORLD_SIZE='2',
                                           MASTER_ADDR='127.0.0.1', MASTER_PORT=port),
                                  cwd=self.path('ab'[rank]), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for rank in range(2)]
        outs = [p.communicate(timeout=300) for p in procs]
        self.assertEqual([p.returncode for p in procs], [2, 2])
        self.assertIn('no process sees both rank_3 and the reference rank_0', outs[0][1])
        self.assertEqual(outs[1][1], '')


if __name__ == '__main__':
    unittest.main()
