"""A hand-made directory in MindSpore's own layout (CPU Float32 suffix, mapping.csv,
constants/, statistic.csv) is read by ls and compare; trace maps a line to kernels."""
import json
import os
import types

import numpy as np
import pytest

import analysis_dumps as d


@pytest.fixture(scope='module')
def ms(module_scratch):
    """root/ms in MindSpore's own layout and root/ref in graphdump's, of the same net (written
    once: the tests only read them)."""
    root = module_scratch
    net = d.simple_net(n=4)
    rank_dir = d.write_dump(os.path.join(root, 'ms'), {0: net, 1: net},
                            cpu_suffix=True, long_names=True, stats=True,
                            parameters={0: {'conv_weight': np.ones((2, 2), np.float32)}})
    const_dir = os.path.join(rank_dir, 'Net', '0', 'constants')
    os.makedirs(const_dir)
    np.save(os.path.join(const_dir,
                         'Parameter.data-1.0.0.1700000000000000.output.0.DefaultFormat.Float32.npy'),
            np.arange(3, dtype=np.float32))
    os.makedirs(os.path.join(rank_dir, '.dump_metadata'))
    d.write_dump(os.path.join(root, 'ref'), {0: net, 1: net})
    return types.SimpleNamespace(root=root, net=net, rank_dir=rank_dir)


def test_ls_reads_the_layout(ms):
    p = d.graphdump('ls', os.path.join(ms.root, 'ms'), '--json')
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    assert j['skipped'] == []
    g = j['ranks'][0]['graphs'][0]
    assert g['net_name'] == 'Net'
    assert g['execution_order_kernels'] == 4
    its = {str(i['iteration']): i for i in g['iterations']}
    assert sorted(its) == ['0', '1', 'constants']
    assert its['0']['kernels'] == 5       # 4 kernels + 1 parameter
    assert its['0']['tensors'] == 9
    assert its['0']['files'] == 9
    assert its['constants']['files'] == 1
    assert j['total']['iterations'] == 2
    text = d.graphdump('ls', ms.rank_dir, '--kernels')
    assert text.returncode == 0
    assert 'Float32' in text.stdout
    assert '123456.npy' in text.stdout   # the mapped (long-name) file is listed
    assert ms.net[0]['full_name'] in text.stdout


def test_mapping_csv_restores_the_kernel(ms):
    j = json.loads(d.graphdump('ls', ms.rank_dir, '--json', '--kernels').stdout)
    it0 = j['ranks'][0]['graphs'][0]['iterations'][0]
    names = {k['full_name']: k['files'] for k in it0['kernel_list']}
    assert any(f.endswith('123456.npy') for f in names[ms.net[0]['full_name']])


def test_compare_against_graphdump_layout(ms):
    p = d.graphdump('compare', os.path.join(ms.root, 'ms'), os.path.join(ms.root, 'ref'),
                    '--json', '-q')
    assert p.returncode == 0, p.stdout + p.stderr
    j = json.loads(p.stdout)
    assert j['summary']['error'] == 0
    assert j['summary']['kernels'] == 8
    # the Parameter exists only in the MindSpore dump
    assert [u['kernel'] for u in j['unpaired']] == ['conv_weight']
    assert j['kernels'][0]['tensors'][0]['dtype_a'] == 'float32'


def test_trace_maps_a_line_to_kernels_and_files(ms):
    p = d.graphdump('trace', ms.rank_dir, 'model.py:12', '--json')
    assert p.returncode == 0, p.stdout + p.stderr
    j = json.loads(p.stdout)
    assert [m['kernel'] for m in j] == [ms.net[2]['full_name']]
    assert j[0]['code'] == 'x = self.layer2(x)'
    assert sorted({f['iteration'] for f in j[0]['files']}) == [0, 1]
    assert len(j[0]['files']) == 4
    for f in j[0]['files']:
        assert os.path.exists(f['path']), f['path']
    # a path suffix works too, a wrong directory does not
    assert d.graphdump('trace', ms.rank_dir, 'project/model.py:12').returncode == 0
    miss = d.graphdump('trace', ms.rank_dir, 'other/model.py:12')
    assert miss.returncode == 1
    assert 'no kernel' in miss.stdout
    # frames further out in the trace count too
    frames = json.loads(d.graphdump('trace', ms.rank_dir, 'module.py:1190', '--json').stdout)
    assert len(frames) == 4
    assert d.graphdump('trace', ms.rank_dir, 'model.py').returncode == 2
