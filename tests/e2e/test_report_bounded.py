"""graphdump report holds what the page shows, not every hit or kernel comparison: on a
multi-rank dump with more hits than the page lists, the hit total, the first hit, the table of
hits, the per-rank and per-(rank, iteration) counts and the markers of the charted rank equal
what `watch --json` says of every hit; with --compare, the counts, the first divergence, the
tables, the per-rank failing kernels and the charted rank's markers equal what `compare --json`
says of every kernel."""
import collections
import copy
import json
import os
import re
import sys

import numpy as np
import pytest

import analysis_dumps as d
from test_report_scale import chart, options, report, report_data

RANKS, KERNELS, ITERATIONS = 8, 60, 3
CLEAN_RANK = 4
SHOWN = 500  # the hits the page's table lists


def start_of(rank):
    """Rank r goes NaN at kernel 10 + 3r of iteration 1 (every kernel after it too, and from
    kernel r of iteration 2 on)."""
    return 10 + 3 * rank


@pytest.fixture(scope='module')
def dumps(module_scratch):
    clean = d.shifted_iterations(d.simple_net(n=KERNELS), ITERATIONS)
    a, b = os.path.join(module_scratch, 'a'), os.path.join(module_scratch, 'b')
    for r in range(RANKS):
        its = copy.deepcopy(clean)
        if r != CLEAN_RANK:
            for k in its[1][start_of(r):]:
                k['outputs'] = [np.full((4, 8), np.nan, np.float32)]
            for k in its[2][r:]:
                k['outputs'] = [np.full((4, 8), np.nan, np.float32)]
        d.write_dump(a, its, rank=r, stats=True)
        d.write_dump(b, clean, rank=r, stats=True)
    return a, b


def watch_hits(dump):
    p = d.graphdump('watch', dump, '--check', 'nan', '--json', '-q')
    assert p.returncode == 1, p.stderr
    return json.loads(p.stdout)['hits']


def table_rows(page):
    table = re.search(r'<table id="watch-hits">(.*?)</table>', page, re.S).group(1)
    return re.findall(r'<tr(?: class="first-hit")?><td>(\d+)</td><td>(\d+)</td><td>(-?\d+)</td>'
                      r'<td><code>(.*?)</code></td>', table)


def check_page(page, hits, charted):
    assert len(hits) > SHOWN  # the page lists only some
    first = hits[0]
    summary = re.search(r'<li class="first-hit-text">(.*?)</li>', page).group(1)
    assert '<code>%s</code>' % first['kernel'] in summary
    assert 'rank %d, graph %d, iteration %d' % (first['rank'], first['graph_id'],
                                                first['iteration']) in summary
    assert '; %d hits in all.' % len(hits) in summary
    assert 'Watchpoint hits (%d; first 500)' % len(hits) in page
    assert table_rows(page) == [(str(h['rank']), str(h['graph_id']), str(h['iteration']),
                                 h['kernel']) for h in hits[:SHOWN]]
    # The rank selector's counts and first hits, and the overview's cells.
    per_rank = collections.Counter(h['rank'] for h in hits)
    per_cell = collections.Counter((h['rank'], h['iteration']) for h in hits)
    firsts = {}
    for h in hits:
        firsts.setdefault(h['rank'], h)
    for value, selected, text in options(page):
        assert selected == (value == charted)
        n = per_rank[value]
        assert text.startswith('rank %d: %d hit%s' % (value, n, '' if n == 1 else 's')), text
        if value in firsts:
            assert ' (first: iteration %d, ' % firsts[value]['iteration'] in text
    data = report_data(page)
    assert data['overview']['cells'] == [[per_cell[(r, it)] for it in range(ITERATIONS)]
                                         for r in range(RANKS)]
    # The charted rank's markers: its first hit along the order of its first hit's iteration,
    # and each plotted kernel's hit iterations.
    mine = [h for h in hits if h['rank'] == charted]
    order = chart(data, 'order-0-values')
    marked = [order['points'][m['index']]['name'] for m in order['markers']
              if m['class'] == 'first-hit']
    assert marked == [mine[0]['kernel']]
    series = [c for c in data['charts'] if re.fullmatch(r'series-\d+-values', c['id'])]
    assert series
    for c in series:
        kernel = c['points'][0]['name']
        want = sorted({h['iteration'] for h in mine if h['kernel'] == kernel})
        got = sorted(c['points'][m['index']]['x'] for m in c['markers'] if m['class'] == 'hit')
        assert got == want, kernel
    # The plotted kernels are the charted rank's first hit kernels.
    hit_kernels = list(dict.fromkeys(h['kernel'] for h in mine))
    assert sorted(c['points'][0]['name'] for c in series) == sorted(hit_kernels[:len(series)])


def test_report_counts_every_hit(path, dumps):
    a, _ = dumps
    hits = watch_hits(a)
    check_page(report(path('r.html'), a, '--check', 'nan'), hits, hits[0]['rank'])
    # Another rank charted: its hits are found again for the markers.
    check_page(report(path('r3.html'), a, '--check', 'nan', '--rank', '3'), hits, 3)


def computed(k):
    return k['op_type'] != 'Parameter' and k['iteration'] >= 0


def check_compare_page(page, result, charted):
    kernels = result['kernels']
    s = result['summary']
    assert ('<li>%d kernel comparisons: %d pass, %d warning, %d error; %d unpaired, %d skipped '
            'files.</li>' % (len(kernels), s['pass'], s['warning'], s['error'],
                             len(result['unpaired']), len(result['skipped']))) in page
    failing = [(i, k) for i, k in enumerate(kernels) if k['verdict'] == 'error' and computed(k)]
    first = failing[0][1]
    text = re.search(r'<li class="first-divergence-text">(.*?)</li>', page).group(1)
    assert ('<code>%s</code></a> (rank %d, graph %d, iteration %d, execution order %d)'
            % (first['kernel_a'], first['rank'], first['graph_id'], first['iteration'],
               first['order'])) in text
    # The table of kernels that did not pass: how many, and the first 200 by their index.
    not_passed = [(i, k) for i, k in enumerate(kernels) if k['verdict'] != 'pass']
    assert len(not_passed) > 200
    assert 'Kernels that did not pass (%d; first 200)' % len(not_passed) in page
    table = re.search(r'<details id="compare-table">(.*?)</details>', page, re.S).group(1)
    rows = re.findall(r'<tr class="\w+"><td>(\d+)</td><td>(\d+)</td><td>\d+</td><td>(-?\d+)</td>'
                      r'<td><code>(.*?)</code>', table)
    assert rows == [(str(i), str(k['rank']), str(k['iteration']), k['kernel_a'])
                    for i, k in not_passed[:200]]
    # The kernels adding error, ranked.
    contributors = result['contributors']
    assert len(contributors) > 200
    table = re.search(r'<details id="adding-error-table" open>(.*?)</details>', page, re.S)
    assert 'Kernels adding error (%d, largest first)' % len(contributors) in table.group(1)
    assert re.findall(r'<tr data-kernel="(.*?)"><td>\d+</td><td>(-?\d+)</td>', table.group(1)) == [
        (c['kernel'], str(c['iteration'])) for c in contributors[:200]]
    # Failing kernels per rank and per (rank, iteration), with the hits.
    per_rank = collections.Counter(k['rank'] for _, k in failing)
    for value, selected, text in options(page):
        assert selected == (value == charted)
        n = per_rank[value]
        assert ' %d failing kernel%s' % (n, '' if n == 1 else 's') in text, text
        mine = [k for _, k in failing if k['rank'] == value]
        if mine:
            assert text.endswith('(first: iteration %d, %s)' % (
                mine[0]['iteration'], mine[0]['kernel_a'].split('/', 2)[2])), text
    # The charted rank's attribution chart marks the first five contributors that are its own.
    data = report_data(page)
    attribution = chart(data, 'compare-attribution')
    marked = [attribution['points'][m['index']]['name'] for m in attribution['markers']
              if m['class'] == 'adds-error']
    assert sorted(marked) == sorted(c['kernel'] for c in contributors[:5] if c['rank'] == charted)
    divergence = [attribution['points'][m['index']]['name'] for m in attribution['markers']
                  if m['class'] == 'first-divergence']
    mine = [k for _, k in failing if k['rank'] == charted]
    assert divergence == ([mine[0]['kernel_a']] if mine else [])
    return failing


def test_report_compare_counts_every_kernel(path, dumps):
    a, b = dumps
    p = d.graphdump('compare', a, b, '--json')
    assert p.returncode == 1, p.stderr
    result = json.loads(p.stdout)
    hits = watch_hits(a)
    page = report(path('c.html'), '--compare', a, b, '--check', 'nan')
    failing = check_compare_page(page, result, hits[0]['rank'])
    # Hits and failing kernels together in the overview.
    cells = collections.Counter((h['rank'], h['iteration']) for h in hits)
    cells.update((k['rank'], k['iteration']) for _, k in failing)
    assert report_data(page)['overview']['cells'] == [
        [cells[(r, it)] for it in range(ITERATIONS)] for r in range(RANKS)]
    # Another charted rank: its kernels are compared again.
    check_compare_page(report(path('c2.html'), '--compare', a, b, '--check', 'nan', '--rank', '2'),
                       result, 2)


if __name__ == '__main__':
    sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', __file__]))
