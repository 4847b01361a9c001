"""graphdump report at scale: a 128-rank dump (with and without --compare) and one rank of a
million statistic.csv rows. The page stays under 5 MB, the rank selector lists every rank, the
charts show the rank that hit first, and the first hit, the first divergence and the NaN/Inf
points sit exactly where they are in the downsampled charts."""
import copy
import json
import os
import re
import sys

import numpy as np
import pytest

import analysis_dumps as d
import report_page

LIMIT = 5 * 1000 * 1000
RANKS, KERNELS, ITERATIONS = 128, 30, 3
BAD_RANK, BAD_ITERATION, BAD_KERNEL = 77, 1, 20


def report(out, *args):
    """Writes the report of `args` to `out`; returns its text (checked to be under LIMIT)."""
    p = d.graphdump('report', *args, '-o', out)
    assert p.returncode == 0, p.stdout + p.stderr
    assert os.path.getsize(out) < LIMIT
    with open(out, encoding='utf-8') as f:
        return f.read()


def report_data(page):
    m = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def chart(data, chart_id):
    found = [c for c in data['charts'] if c['id'] == chart_id]
    assert len(found) == 1, (chart_id, [c['id'] for c in data['charts']])
    return found[0]


def options(page):
    """(value, selected, text) of each option of the rank selector."""
    select = re.search(r'<select id="rank-selector">(.*?)</select>', page, re.S).group(1)
    return [(int(v), bool(s), t) for v, s, t in
            re.findall(r'<option value="(\d+)"( selected)?>(.*?)</option>', select)]


def marker_points(c, cls):
    return [c['points'][m['index']] for m in c['markers'] if m['class'] == cls]


def value_at(c, series, x):
    """The value series `series` has at position x, or KeyError when the chart dropped it."""
    s = [s for s in c['series'] if s['name'] == series][0]
    for p, v in zip(c['points'], s['values']):
        if p['x'] == x:
            return v
    raise KeyError(x)


def check_ranks_section(page, data, selected):
    opts = options(page)
    assert [o[0] for o in opts] == list(range(RANKS))
    assert [o[0] for o in opts if o[1]] == [selected]
    overview = data['overview']
    assert overview['ranks'] == list(range(RANKS))
    assert overview['columns'] == [str(i) for i in range(ITERATIONS)]
    assert overview['rank'] == selected
    return opts, overview


@pytest.fixture(scope='module')
def many_ranks(module_scratch):
    """Dumps a and b of 128 ranks (statistics only) and the kernel names. In a, rank 77 goes
    NaN at kernel 20 of iteration 1 onward (the first hit), and rank 0 gets an Inf later
    (iteration 2)."""
    net = d.simple_net(n=KERNELS)
    clean = d.shifted_iterations(net, ITERATIONS, inputs=False)
    bad = copy.deepcopy(clean)
    for k in bad[BAD_ITERATION][BAD_KERNEL:]:
        k['outputs'] = [np.full((4, 8), np.nan, np.float32)]
    late = copy.deepcopy(clean)
    late[2][5]['outputs'][0][0, 0] = np.inf
    a, b = os.path.join(module_scratch, 'a'), os.path.join(module_scratch, 'b')
    for r in range(RANKS):
        its = bad if r == BAD_RANK else late if r == 0 else clean
        d.write_dump(a, its, rank=r, files=False, stats=True)
        d.write_dump(b, clean, rank=r, files=False, stats=True)
    return a, b, [k['full_name'] for k in net]


def test_many_ranks_first_hit(scratch, path, many_ranks):
    a, _, names = many_ranks
    first = names[BAD_KERNEL]
    out = path('report.html')
    page = report(out, a)
    data = report_data(page)
    opts, overview = check_ranks_section(page, data, BAD_RANK)
    assert ('rank 77: %d hits (first: iteration 1, %s nan)'
            % (KERNELS - BAD_KERNEL, first.split('/', 2)[2])) in opts[BAD_RANK][2]
    assert 'rank 0: 2 hits (first: iteration 2' in opts[0][2]  # inf and overflow
    assert 'rank 1: 0 hits' in opts[1][2]
    # Hits only where they were planted.
    for r, row in enumerate(overview['cells']):
        want = [0, KERNELS - BAD_KERNEL, 0] if r == BAD_RANK else [0, 0, 2] if r == 0 else [0, 0, 0]
        assert row == want, r
    summary = re.search(r'<li class="first-hit-text">(.*?)</li>', page).group(1)
    assert '<code>%s</code>' % first in summary
    assert 'rank 77, graph 0, iteration 1' in summary
    # Along the order of rank 77's iteration 1: the first hit on kernel 20, NaN there.
    order = chart(data, 'order-0-values')
    assert '(rank 77, iteration 1)' in page
    hit = marker_points(order, 'first-hit')
    assert [(p['x'], p['name']) for p in hit] == [(BAD_KERNEL, first)]
    assert value_at(order, 'max', BAD_KERNEL) == 'NaN'
    assert value_at(order, 'max', BAD_KERNEL - 1) == float(
        '%g' % (d.simple_net(n=KERNELS)[BAD_KERNEL - 1]['outputs'][0]
                .astype(np.float64).max() + 1))

    # The rank selector is drawn with the overview: one row per rank, the note says which.
    tree = report_page.render(scratch, out, height=2400)
    rows = tree.find('g', cls='overview-row')
    assert [int(r.attrs['data-rank']) for r in rows] == list(range(RANKS))
    note = tree.find('p', id='rank-note')[0]
    assert 'The charts below show this rank: rank 77' in note.text


def test_many_ranks_compare(path, many_ranks):
    """--compare: the charts are rank 77's, its first divergence exactly at kernel 20 of
    iteration 1 (position 30 + 20 of the rank's 90 kernels)."""
    a, b, names = many_ranks
    page = report(path('compare.html'), '--compare', a, b)
    data = report_data(page)
    check_ranks_section(page, data, BAD_RANK)
    assert 'Comparison along the execution order (rank 77)' in page
    cosine = chart(data, 'compare-cosine')
    assert cosine['x_count'] == KERNELS * ITERATIONS
    assert {p['detail'].split(',')[0] for p in cosine['points']} == {'rank 77'}
    divergence = marker_points(cosine, 'first-divergence')
    assert [(p['x'], p['name']) for p in divergence] == [
        (KERNELS * BAD_ITERATION + BAD_KERNEL, names[BAD_KERNEL])]


def test_many_ranks_rank_option(path, many_ranks):
    """--rank 0: rank 0's charts, its own (later) hit marked; a rank the dump lacks is refused."""
    a, _, names = many_ranks
    page = report(path('rank0.html'), a, '--rank', '0')
    data = report_data(page)
    check_ranks_section(page, data, 0)
    order = chart(data, 'order-0-values')
    assert [(p['x'], p['name']) for p in marker_points(order, 'first-hit')] == [(5, names[5])]
    assert value_at(order, 'max', 5) == 'Inf'
    p = d.graphdump('report', a, '--rank', '500', '-o', path('x.html'))
    assert p.returncode == 2, p.stdout + p.stderr
    assert '--rank 500: the dump holds no such rank (ranks: 0, 1, 2,' in p.stderr
    assert not os.path.exists(path('x.html'))


def test_million_rows(path):
    """One rank, one iteration of 1,000,000 kernels written straight to statistic.csv: an
    Inf at kernel 123457 (the first hit), NaN at 654321 and at 900000-900010."""
    n, inf_at, nan_at, run = 1000000, 123457, 654321, range(900000, 900011)
    rank = path('big/rank_0')
    iteration = os.path.join(rank, 'Net', '0', '0')
    os.makedirs(iteration)
    os.makedirs(os.path.join(rank, 'execution_order'))
    names = ['Default/net-Net/b%d/Add-op%d' % (i // 1000, i) for i in range(n)]
    with open(os.path.join(rank, 'execution_order', 'ms_execution_order_graph_0.csv'),
              'w') as f:
        f.write('NodeExecutionOrder-FullNameWithScope\n' + '\n'.join(names) + '\n')
    special = {inf_at: 'inf,1,inf,0', nan_at: 'nan,nan,nan,3'}
    special.update({i: 'nan,nan,nan,1' for i in run})
    rows = [d.STAT_HEADER]
    for i, name in enumerate(names):
        values = special.get(i) or '%d,%d,%d,0' % (1 + i % 977, -(i % 613), 3 + i % 101)
        rows.append('Add,%s,0,0,%d,output,0,128,float32,"(4,8)",%s\n'
                    % (d.file_kernel_name(name), 1000 + i, values))
    with open(os.path.join(iteration, 'statistic.csv'), 'w') as f:
        f.write(''.join(rows))

    page = report(path('big.html'), path('big'))
    data = report_data(page)
    assert [o[0] for o in options(page)] == [0]
    for chart_id in ('order-0-values', 'order-0-l2norm'):
        c = chart(data, chart_id)
        assert c['x_count'] == n
        assert len(c['points']) < 4000  # a few per pixel column, not a million
        xs = [p['x'] for p in c['points']]
        assert xs == sorted(set(xs))
        for p in c['points']:
            assert p['name'] == names[p['x']]
        assert [(p['x'], p['name']) for p in marker_points(c, 'first-hit')] == [
            (inf_at, names[inf_at])]
        series = 'max' if chart_id.endswith('values') else 'l2norm'
        assert value_at(c, series, inf_at) == 'Inf'
        assert value_at(c, series, nan_at) == 'NaN'
        assert value_at(c, series, run[0]) == 'NaN'  # the run's first NaN
        # Every non-finite value drawn is one the dump holds, at its own position.
        s = [s for s in c['series'] if s['name'] == series][0]
        drawn = {p['x'] for p, v in zip(c['points'], s['values']) if isinstance(v, str)}
        assert drawn <= {inf_at, nan_at, *run}
        # The extremes of the finite values survive: max 977 and the lowest max, 1.
        finite = [v for v in s['values'] if not isinstance(v, str)]
        if series == 'max':
            assert (min(finite), max(finite)) == (1, 977)
    summary = re.search(r'<li class="first-hit-text">(.*?)</li>', page).group(1)
    assert ('<code>%s</code> output 0 (rank 0, graph 0, iteration 0)' % names[inf_at]
            in summary)


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
