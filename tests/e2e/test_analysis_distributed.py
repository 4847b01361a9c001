"""Distributed analysis: `graphdump watch` and `graphdump compare --ranks` as one job of 4
processes on torch.distributed (gloo) print exactly what one process prints (text, --json and the
exit status), with --nproc 4 on a shared directory and with 4 processes started the way torchrun
starts them, on two "nodes" whose disks each hold some of the ranks."""
import copy
import os
import shutil
import socket
import subprocess
import time

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


def start_job(cwds, args, world_size, env=None, unprivileged=()):
    """Processes of one job, started as torchrun starts them, in {rank: cwd} (a rank left out
    never starts) with {rank: arguments} (None: the others'). The ranks in `unprivileged` run
    without root's power to read any directory. Returns {rank: (exit status, stdout, stderr)}
    and the seconds until the last one ended."""
    port = str(free_port())
    began = time.monotonic()
    procs = {}
    for rank, cwd in cwds.items():
        command = [os.environ.get('GRAPHDUMP_BIN', 'graphdump')] + args.get(rank, args[None])
        if rank in unprivileged and os.geteuid() == 0:
            command = ['setpriv', '--inh-caps=-all', '--ambient-caps=-all',
                       '--bounding-set=-dac_override,-dac_read_search', '--'] + command
        procs[rank] = subprocess.Popen(
            command,
            env=dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world_size),
                     MASTER_ADDR='127.0.0.1', MASTER_PORT=port, **(env or {})),
            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ended = {}
    for rank, p in procs.items():
        out, err = p.communicate(timeout=300)
        ended[rank] = (p.returncode, out, err)
    return ended, time.monotonic() - began


def test_a_process_that_never_joins_is_named_within_the_timeout(all_ranks):
    """Processes 0 and 1 of 3 (and then 1 and 2: process 0, which serves the rendezvous, never
    starts): each ends within the timeout (once took 2.2 times it) with exit 3 and an error
    naming the process that did not join."""
    timeout = 10
    for missing in (2, 0):
        cwds = {r: all_ranks for r in range(3) if r != missing}
        ended, seconds = start_job(cwds, {None: ['watch', 'dump', '-q']}, 3,
                                   env={'GRAPHDUMP_DIST_TIMEOUT': str(timeout)})
        assert seconds < timeout + 7, (missing, seconds, ended)
        for rank, (code, out, err) in ended.items():
            assert code == 3, (missing, rank, err)
            assert out == ''
            assert 'process %d of 3 did not join the job within %d s' % (missing, timeout) in err, \
                (missing, rank, err)


def test_processes_must_run_the_same_command_on_the_same_kind_of_dump(all_ranks, path):
    """Processes given different commands, DIRs, --checks, --ranks or dumps of different
    graphdump versions once merged their parts without a word (or failed with a raw JSON
    exception): every process now stops with exit 2, and process 0 names the process that
    differs and what differs."""
    shutil.copytree(os.path.join(all_ranks, 'dump'), path('dump'))
    shutil.copytree(os.path.join(all_ranks, 'dump'), path('copy'))
    cases = [(['compare', 'dump', '--ranks'], "process 1 runs 'compare --ranks', process 0 "
              "runs 'watch'"),
             (['watch', 'copy'], "process 1 reads DIR 'copy', process 0 DIR 'dump'"),
             (['watch', 'dump', '--check', 'inf'],
              "process 1 was given --check 'inf', process 0 --check 'nan,inf'")]
    for args, message in cases:
        ended, _ = start_job({0: path(''), 1: path('')},
                             {None: ['watch', 'dump', '-q'], 1: args + ['-q']}, 2)
        assert [ended[r][0] for r in (0, 1)] == [2, 2], (args, ended)
        assert message in ended[0][2], (args, ended[0][2])
        assert 'every process of the job must be given the same command' in ended[0][2]
        assert 'json' not in ended[0][2].lower(), ended[0][2]
        assert ended[1][2] == '' and ended[0][1] == ended[1][1] == ''
    ended, _ = start_job({0: path(''), 1: path('')},
                         {None: ['compare', 'dump', '--ranks', '-q'],
                          1: ['compare', 'dump', '--ranks=0,1', '-q']}, 2)
    assert [ended[r][0] for r in (0, 1)] == [2, 2], ended
    assert "process 1 was given --ranks '0,1', process 0 --ranks ''" in ended[0][2], ended[0][2]
    # A dump written by another graphdump version on process 1's disk.
    for r in range(RANKS):
        os.makedirs(path('copy/rank_%d/.dump_metadata' % r))
        with open(path('copy/rank_%d/.dump_metadata/config.json' % r), 'w') as f:
            f.write('{"device_target": "cpu", "graphdump_version": "9.9.9"}\n')
    os.makedirs(path('b'))
    shutil.move(path('copy'), path('b/dump'))
    ended, _ = start_job({0: path(''), 1: path('b')}, {None: ['watch', 'dump', '-q']}, 2)
    assert [ended[r][0] for r in (0, 1)] == [2, 2], ended
    assert ("process 1 reads a dump of graphdump 9.9.9 in dump/rank_0, process 0 a dump "
            "without graphdump_version (MindSpore's) in dump/rank_0") in ended[0][2], ended[0][2]
    # A DIR that process 1 cannot list is an error naming it (exit 3), not a node without ranks.
    if os.geteuid() == 0 and shutil.which('setpriv') is None:
        return
    os.makedirs(path('c/dump'))
    os.chmod(path('c/dump'), 0)
    try:
        ended, _ = start_job({0: path(''), 1: path('c')}, {None: ['watch', 'dump', '-q']}, 2,
                             unprivileged={1})
    finally:
        os.chmod(path('c/dump'), 0o700)
    assert [ended[r][0] for r in (0, 1)] == [3, 3], ended
    assert ("process 1: dump: cannot read the directory: Permission denied"
            in ended[0][2]), ended[0][2]
    assert ended[1][2] == ''
