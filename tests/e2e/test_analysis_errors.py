"""Bad input: missing and non-dump directories, truncated and corrupt .npy files, a malformed
statistic.csv, directories that cannot be read. Messages name the file; compare and watch go on
with the rest of a dump whose files are bad, and stop at a directory they cannot read."""
import glob
import json
import os
import subprocess
import types

import pytest

import analysis_dumps as d


@pytest.fixture
def dumps(scratch):
    """Two dumps of the same 4-kernel net, a and b, in the test's scratch directory (root)."""
    root = scratch
    net = d.simple_net(n=4)
    a, b = os.path.join(root, 'a'), os.path.join(root, 'b')
    d.write_dump(a, {0: net})
    d.write_dump(b, {0: net})
    return types.SimpleNamespace(root=root, net=net, a=a, b=b)


def file_of(net, root, kernel_index, io='output'):
    name = d.file_kernel_name(net[kernel_index]['full_name'])
    [path] = glob.glob(os.path.join(root, 'rank_0', 'Net', '0', '0', '*%s*.%s.0.*' % (name, io)))
    return path


def test_missing_and_non_dump_directories(dumps):
    missing = os.path.join(dumps.root, 'nope')
    for cmd in (['ls', missing], ['watch', missing], ['compare', missing, dumps.b],
                ['trace', missing, 'x.py:1'], ['report', missing, '-o', 'r.html']):
        p = d.graphdump(*cmd)
        assert p.returncode == 2, cmd
        assert missing + ': no such directory' in p.stderr
    empty = os.path.join(dumps.root, 'empty')
    os.makedirs(empty)
    p = d.graphdump('ls', empty)
    assert p.returncode == 2
    assert empty + ': not a dump directory' in p.stderr
    assert 'rank_{id}' in p.stderr
    p = d.graphdump('compare', dumps.a)
    assert p.returncode == 2
    p = d.graphdump('compare', dumps.a, dumps.b, '--atol', 'abc')
    assert p.returncode == 2


def test_unwritable_output_paths_fail_first_and_keep_old_files(dumps):
    blocker = os.path.join(dumps.root, 'a_file')
    with open(blocker, 'w') as f:
        f.write('keep')
    two_ranks = os.path.join(dumps.root, 'ranks')
    for rank in (0, 1):
        d.write_dump(two_ranks, {0: dumps.net}, rank=rank)
    cases = [(['compare', dumps.a, dumps.b, '-q', '--out'], '--out'),
             (['compare', two_ranks, '--ranks', '-q', '--out'], '--out'),
             (['report', dumps.a, '-o'], '-o')]
    for cmd, option in cases:
        for target, why in ((os.path.join(blocker, 'x'), blocker + ' is not a directory'),
                            (os.path.join(dumps.root, 'no', 'x'), 'No such file or directory'),
                            (dumps.root, dumps.root + ' is a directory')):
            p = d.graphdump(*cmd, target)
            assert p.returncode == 2, (cmd, target, p.stderr)
            assert 'error: %s %s: ' % (option, target) in p.stderr
            assert why in p.stderr
            assert p.stdout == '', cmd  # refused before any work
    # A good path is written whole, replacing the old file; no temporary is left.
    for cmd, option in cases:
        target = os.path.join(dumps.root, 'out.txt')
        with open(target, 'w') as f:
            f.write('old')
        p = d.graphdump(*cmd, target)
        assert p.returncode in (0, 1), (cmd, p.stderr)
        with open(target) as f:
            text = f.read()
        assert text.startswith('<!DOCTYPE html>' if cmd[0] == 'report' else 'rank'), \
            (cmd, text[:80])
        assert sorted(os.listdir(dumps.root)) == ['a', 'a_file', 'b', 'out.txt', 'ranks']


def test_iteration_that_is_not_dumped(dumps):
    p = d.graphdump('compare', dumps.a, dumps.b, '-q', '--iteration', '99')
    assert p.returncode == 2  # nothing paired: not a pass (docs/analysis.md)
    assert 'no kernel pairs: --iteration 99; A has iterations 0, B has 0' in p.stderr
    p = d.graphdump('compare', dumps.a, dumps.b, '-q', '--iteration', '-5')
    assert p.returncode == 2
    assert '--iteration -5: iterations count from 0' in p.stderr
    p = d.graphdump('compare', dumps.a, dumps.b, '-q', '--iteration', '0')
    assert p.returncode == 0, p.stderr


def test_truncated_npy_is_skipped_and_named(dumps):
    path = file_of(dumps.net, dumps.a, 2)
    with open(path, 'rb') as f:
        data = f.read()
    with open(path, 'wb') as f:
        f.write(data[:-20])
    p = d.graphdump('compare', dumps.a, dumps.b, '-q', '--json')
    assert p.returncode == 0  # skipped files are reported, not failed
    j = json.loads(p.stdout)
    assert j['summary']['error'] == 0
    assert j['summary']['kernels'] == 4  # the others were compared
    [skipped] = j['skipped']
    assert skipped['path'] == path
    assert 'truncated .npy: header promises 128 data bytes, file has 108' in skipped['reason']
    assert 'skipped 1 file(s)' in p.stderr
    assert path in p.stderr
    w = d.graphdump('watch', dumps.a, '-q')
    assert w.returncode == 0  # no hit; the skipped file is listed on stderr
    assert '7 tensors checked' in w.stdout
    assert path + ': truncated .npy' in w.stderr


def test_corrupt_header_is_named(dumps):
    path = file_of(dumps.net, dumps.a, 1, 'input')
    with open(path, 'r+b') as f:
        f.seek(0)
        f.write(b'GARBAGE!')
    p = d.graphdump('watch', dumps.a, '-q', '--json')
    assert p.returncode == 0
    [skipped] = json.loads(p.stdout)['skipped']
    assert skipped['path'] == path
    assert path + ': not a valid .npy file: magic bytes are not \\x93NUMPY' in skipped['reason']
    with open(path, 'r+b') as f:
        data = bytearray(f.read())
        data[0:8] = b'\x93NUMPY\x01\x00'
        data[10:30] = b"{'descr': '<U8', 'fo"
        f.seek(0)
        f.write(data)
    p = d.graphdump('compare', dumps.a, dumps.b, '-q')
    assert "not a valid .npy file: descr '<U8'" in p.stderr


def test_malformed_statistic_csv_is_named(dumps):
    d.write_dump(dumps.a, {1: dumps.net}, files=False, stats=True)
    csv_path = os.path.join(dumps.a, 'rank_0', 'Net', '0', '1', 'statistic.csv')
    with open(csv_path, 'a') as f:
        f.write('Add,x,0,0,1,sideways,0,4,float32,"(1)",1,1,1,0,\n')
    p = d.graphdump('ls', dumps.a)
    assert p.returncode == 0
    assert csv_path + ':10: IO is \'sideways\' (expected input or output)' in p.stderr
    with open(csv_path, 'w') as f:
        f.write('hello,world\n1,2\n')
    p = d.graphdump('watch', dumps.a, '-q')
    assert csv_path + ':1: malformed statistic.csv header' in p.stderr
    # iteration 0 was still checked
    assert '8 tensors checked' in p.stdout


def test_unparsable_file_name_is_listed(dumps):
    open(os.path.join(dumps.a, 'rank_0', 'Net', '0', '0', 'random.npy'), 'w').close()
    p = d.graphdump('ls', dumps.a, '--json')
    [skipped] = json.loads(p.stdout)['skipped']
    assert skipped['path'].endswith('random.npy')
    assert 'file name does not follow' in skipped['reason']


def unprivileged(args):
    """`args` run so that file permissions apply: as root (the tests' usual user), without the
    capabilities that let root read any directory (setpriv drops them for the command)."""
    if os.geteuid() != 0:
        return list(args)
    return ['setpriv', '--inh-caps=-all', '--ambient-caps=-all',
            '--bounding-set=-dac_override,-dac_read_search', '--'] + list(args)


def graphdump_unprivileged(*args):
    binary = os.environ.get('GRAPHDUMP_BIN', 'graphdump')
    return subprocess.run(unprivileged([binary] + [str(a) for a in args]), capture_output=True,
                          text=True, timeout=120)


def permissions_apply(root):
    """Whether a directory of mode 000 is unreadable to unprivileged() commands here."""
    probe = os.path.join(root, 'probe')
    os.makedirs(probe)
    os.chmod(probe, 0)
    try:
        p = subprocess.run(unprivileged(['ls', probe]), capture_output=True, text=True)
    except FileNotFoundError:
        return False
    finally:
        os.chmod(probe, 0o700)
        os.rmdir(probe)
    return p.returncode != 0 and 'Permission denied' in p.stderr


def test_unreadable_directories_are_errors_not_empty(dumps):
    """A directory the command cannot list (mode 000) or search (mode 0444: its entries cannot
    be looked at) is an error naming it and the system's reason, exit 3, in every command:
    never a rank of "0 graph(s)", "0 of 2 ranks hit" or "all ranks agree" about a rank that was
    not read, nor "not a dump directory"."""
    if not permissions_apply(dumps.root):
        pytest.skip('no way to make a directory unreadable here (root without setpriv)')
    for rank in (0, 1):
        d.write_dump(os.path.join(dumps.root, 'ranks'), {0: dumps.net}, rank=rank)
        d.write_dump(os.path.join(dumps.root, 'other'), {0: dumps.net}, rank=rank)
    ranks, other = os.path.join(dumps.root, 'ranks'), os.path.join(dumps.root, 'other')
    report = os.path.join(dumps.root, 'r.html')
    commands = [['ls', ranks], ['ls', ranks, '--json'], ['watch', ranks],
                ['watch', ranks, '--json'], ['watch', ranks, '--first'],
                ['compare', ranks, '--ranks'], ['compare', ranks, '--ranks', '--json'],
                ['compare', ranks, other], ['compare', other, ranks, '--json'],
                ['trace', ranks, 'model.py:10'], ['report', ranks, '-o', report]]
    assert all(graphdump_unprivileged(*c).returncode in (0, 1) for c in commands)
    os.remove(report)
    for unreadable, mode in ((os.path.join(ranks, 'rank_1'), 0),
                             (os.path.join(ranks, 'rank_1'), 0o444),
                             (os.path.join(ranks, 'rank_1', 'Net', '0'), 0),
                             (os.path.join(ranks, 'rank_0', 'Net', '0', '0'), 0),
                             (ranks, 0)):
        os.chmod(unreadable, mode)
        try:
            for c in commands:
                p = graphdump_unprivileged(*c)
                assert p.returncode == 3, (c, unreadable, oct(mode), p.stdout, p.stderr)
                assert unreadable + ': ' in p.stderr, (c, p.stderr)
                assert 'Permission denied' in p.stderr, (c, p.stderr)
                assert 'not a dump directory' not in p.stderr, (c, p.stderr)
                assert 'all ranks agree' not in p.stdout and 'ranks hit' not in p.stdout, c
                assert not os.path.exists(report)
        finally:
            os.chmod(unreadable, 0o755)
