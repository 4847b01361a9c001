"""Distributed analysis: `graphdump watch` and `graphdump compare --ranks` as one job of 4
processes on torch.distributed (gloo) print exactly what one process prints (text, --json and the
exit status), with --nproc 4 on a shared directory and with 4 processes started the way torchrun
starts them, on two "nodes" whose disks each hold some of the ranks."""
import copy
import os
import shutil
import socket
import subprocess

import numpy as np
import pytest

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


@pytest.fixture(scope='module')
def all_ranks(module_scratch):
    """A directory whose dump/ holds every rank (written once for the module's tests)."""
    root = module_scratch
    write_ranks(os.path.join(root, 'dump'), range(RANKS))
    return root


def run_in(cwd, *args):
    return subprocess.run([os.environ.get('GRAPHDUMP_BIN', 'graphdump')] + list(args),
                          capture_output=True, text=True, cwd=cwd)


def assert_same(single, job):
    assert job.stdout == single.stdout, job.stderr
    assert job.returncode == single.returncode, job.stderr
    assert single.stdout.strip()


def test_nproc(all_ranks):
    """--nproc 4 over one directory: ranks go round-robin to the processes."""
    for args in (['watch', 'dump', '--check', 'nan,inf'],
                 ['watch', 'dump', '--check', 'nan,inf', '--json'],
                 ['watch', 'dump', '--check', 'nan,inf', '--first'],
                 ['compare', 'dump', '--ranks'],
                 ['compare', 'dump', '--ranks', '--json'],
                 ['compare', 'dump', '--ranks=5,3,1', '--json']):
        single = run_in(all_ranks, *args)
        job = run_in(all_ranks, *args, '--nproc', '4')
        assert_same(single, job)
    single = run_in(all_ranks, 'watch', 'dump', '--check', 'nan,inf')
    assert single.returncode == 1
    assert 'first rank to hit: rank 4' in single.stdout
    ranks = run_in(all_ranks, 'compare', 'dump', '--ranks')
    assert 'rank 3 vs rank 0' in ranks.stdout
    # Usage errors are one process's.
    p = run_in(all_ranks, 'compare', 'dump', '--ranks=0,9', '--nproc', '2')
    assert p.returncode == 2
    assert p.stderr.count('--ranks: rank 9 is not in dump (ranks found: '
                          '0, 1, 2, 3, 4, 5)') == 1, p.stderr
    p = run_in(all_ranks, 'compare', 'dump', all_ranks, '--nproc', '2')
    assert p.returncode == 2
    assert '--nproc runs compare --ranks only' in p.stderr


def test_node_local_disks(all_ranks, path):
    """Four processes started as torchrun starts them, two per "node": node a's disk holds
    ranks 0-2, node b's ranks 3-5 and a copy of rank 0 (the reference of compare --ranks).
    Each process reads only the directories its node holds; process 0's output is the
    single-process output over all six ranks."""
    nodes = {'a': [0, 1, 2], 'b': [3, 4, 5]}
    for node, ranks in nodes.items():
        os.makedirs(path(node))
        for r in ranks:
            shutil.copytree(os.path.join(all_ranks, 'dump', 'rank_%d' % r),
                            path('%s/dump/rank_%d' % (node, r)))
    shutil.copytree(os.path.join(all_ranks, 'dump', 'rank_0'), path('b/dump/rank_0'))
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
                cwd=path('a' if rank < 2 else 'b'), stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=300) for p in procs]
        single = run_in(all_ranks, *args)
        assert outs[0][0] == single.stdout, outs[0][1]
        assert procs[0].returncode == single.returncode, outs[0][1]
        for p, (out, err) in zip(procs[1:], outs[1:]):
            assert out == ''
            assert p.returncode == 0, err
    # Without the reference on node b, its ranks cannot be compared: one clear error.
    shutil.rmtree(path('b/dump/rank_0'))
    port = str(free_port())
    procs = [subprocess.Popen([os.environ.get('GRAPHDUMP_BIN', 'graphdump'), 'compare', 'dump',
                               '--ranks'],
                              env=dict(os.environ, RANK=str(rank), WORLD_SIZE='2',
                                       MASTER_ADDR='127.0.0.1', MASTER_PORT=port),
                              cwd=path('ab'[rank]), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for rank in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [2, 2]
    assert 'no process sees both rank_3 and the reference rank_0' in outs[0][1]
    assert outs[1][1] == ''
