"""graphdump report: one self-contained HTML page whose inline script (d3.js, inlined) draws the
charts. Headless Chromium runs the page, dumps the drawn DOM and takes a screenshot; the DOM must
hold the NaN and +-Inf markers on the right kernels with their full names, kernel names on the
axes, the first-divergence marker on the first failing kernel (not on a parameter), a chart for a
one-iteration dump, and the charts before the collapsible tables."""
import copy
import json
import os
import re
import shutil

import numpy as np

import analysis_dumps as d
from report_page import render, series_kernels, within


def report(scratch, *args):
    out = os.path.join(scratch, 'report%d.html' % len(os.listdir(scratch)))
    p = d.graphdump('report', *args, '-o', out)
    assert p.returncode == 0, p.stdout + p.stderr
    assert 'wrote ' + out in p.stdout
    with open(out, encoding='utf-8') as f:
        page = f.read()
    assert_self_contained(page)
    return out, page


def assert_self_contained(page):
    # Every script is inline; nothing names another resource to load.
    scripts = re.findall(r'<script\b[^>]*>', page)
    assert len(scripts) == 3, scripts  # the data, d3.js, the drawing script
    for s in scripts:
        assert 'src' not in s
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:|//|file:)', page)
    assert not re.search(r'<(link|iframe|img|object|embed)\b', page)
    assert not re.search(r'@import|url\(', page)
    assert 'd3={version:"3.' in page.replace(' ', '')  # the library itself is inlined


def assert_axis_names(svg, names, each=1):
    """The chart's x labels carry the kernels' full names (data-kernel and hover title),
    `each` times per name."""
    labels = within(svg, 'text', 'x-label')
    assert labels
    for name in names:
        match = [l for l in labels if l.attrs.get('data-kernel') == name]
        assert len(match) == each, name
        assert match[0].title().startswith(name), match[0].title()
        assert match[0].text.strip().lstrip('\u2026') in name


def test_compare_report(scratch):
    net = d.simple_net(n=8)
    bad = copy.deepcopy(net)
    for i in range(5, 8):
        bad[i]['outputs'] = [net[i]['outputs'][0] * 1.5]
    nan = bad[6]['outputs'][0].copy()
    nan[0, 0] = np.nan
    bad[6]['outputs'] = [nan]
    # A parameter that differs: compare lists it apart, never as the first failure.
    w = np.ones((3, 3), np.float32)
    a, b = os.path.join(scratch, 'a'), os.path.join(scratch, 'b')
    d.write_dump(a, {0: bad, 1: bad, 2: bad}, parameters={i: {'fc_weight': w * 2} for i in range(3)})
    d.write_dump(b, {0: net, 1: net, 2: net}, parameters={i: {'fc_weight': w} for i in range(3)})
    j = json.loads(d.graphdump('compare', a, b, '--json').stdout)
    assert j['differing_sources'][0]['kernel'] == 'fc_weight'
    assert j['first_failure']['kernel'] == net[5]['full_name']

    out, page = report(scratch, '--compare', a, b)
    tree = render(scratch, out)
    first = net[5]['full_name']
    marks = tree.find(cls='first-divergence')
    marks = [m for m in marks if m.tag == 'g']
    assert len(marks) >= 2  # on both compare charts
    for m in marks:
        assert m.attrs['data-kernel'] == first
        assert first in m.title()
    assert len(tree.find(id='first-divergence')) == 1
    assert tree.find('g', id='first-divergence')[0].attrs['data-kernel'] == first
    summary = tree.find(cls='first-divergence-text')[0]
    assert first in ''.join(e.text for e in summary.iter())
    assert 'fc_weight' in ''.join(e.text for e in tree.find('section', id='summary')[0].iter())

    # The compare charts: one point per computed kernel and iteration, named on the axis.
    cosine = tree.chart('compare-cosine')
    assert_axis_names(cosine, [first], each=3)  # one per iteration
    kernels = [p.attrs['data-kernel'] for p in within(cosine, cls='point')] + \
              [p.attrs['data-kernel'] for p in within(cosine, cls='nonfinite')]
    assert len(kernels) == 24
    assert 'fc_weight' not in kernels
    # The NaN kernel's cosine is not a number: a NaN marker on it, in each iteration.
    nans = within(cosine, 'path', 'nan')
    assert [m.attrs['data-kernel'] for m in nans] == [net[6]['full_name']] * 3
    assert net[6]['full_name'] in nans[0].title()
    assert '= NaN' in nans[0].title()

    # Along the execution order (iteration 0, where the NaN hit): NaN markers for layer6's
    # max, min, mean and l2norm, on no other kernel; the other kernels are points.
    values = tree.chart('order-0-values')
    nan_marks = within(values, 'path', 'nan') + within(tree.chart('order-0-l2norm'), 'path',
                                                       'nan')
    assert {m.attrs['data-kernel'] for m in nan_marks} == {net[6]['full_name']}
    assert sorted(m.attrs['data-series'] for m in nan_marks) == ['l2norm', 'max', 'mean', 'min']
    points = {p.attrs['data-kernel'] for p in within(values, 'circle', 'point')}
    assert points == {k['full_name'] for k in net} - {net[6]['full_name']}
    hit = [m for m in within(values, 'g', 'first-hit')]
    assert [m.attrs['data-kernel'] for m in hit] == [net[6]['full_name']]
    assert [m.attrs['data-kernel'] for m in within(values, 'g', 'first-divergence')] == [first]
    assert_axis_names(values, [k['full_name'] for k in net])

    # Across iterations: the kernels that hit and the first divergence, not the first ones.
    assert series_kernels(tree) == [first, net[6]['full_name']]
    assert 'id="watch-hits"' in page


def test_statistics_with_infinities(scratch):
    """A statistics-only dump: -inf and +inf from statistic.csv, an all-NaN iteration."""
    net = d.simple_net(n=6)
    its = d.shifted_iterations(net, 3)
    inf = its[1][3]['outputs'][0].copy()
    inf[0, 0], inf[1, 1] = -np.inf, np.inf
    its[1][3]['outputs'] = [inf]
    its[2][4]['outputs'] = [np.full((4, 8), np.nan, np.float32)]
    dump = os.path.join(scratch, 'stats')
    d.write_dump(dump, its, files=False, stats=True)
    with open(os.path.join(dump, 'rank_0', 'Net', '0', '1', 'statistic.csv')) as f:
        row = [l for l in f if 'layer3' in l and ',output,' in l][0]
    assert ',inf,-inf,inf,' in row  # max, min, l2norm

    out, _ = report(scratch, dump)
    tree = render(scratch, out)
    k3, k4 = net[3]['full_name'], net[4]['full_name']
    # Across iterations, the two kernels that hit (not the first six kernels).
    assert series_kernels(tree) == [k3, k4]
    # series-0 is layer3: +Inf max, -Inf min at iteration 1, +Inf l2norm; finite elsewhere.
    v3, n3 = tree.chart('series-0-values'), tree.chart('series-0-l2norm')
    pos = within(v3, 'path', 'pos-inf')
    neg = within(v3, 'path', 'neg-inf')
    assert [(m.attrs['data-kernel'], m.attrs['data-series']) for m in pos] == [(k3, 'max')]
    assert [(m.attrs['data-kernel'], m.attrs['data-series']) for m in neg] == [(k3, 'min')]
    assert 'iteration 1' in pos[0].title()
    assert [m.attrs['data-series'] for m in within(n3, 'path', 'pos-inf')] == ['l2norm']
    assert len(within(v3, 'circle', 'point', data_series='max')) == 2
    # The labels of the bands say what the symbols mean.
    assert {within(b, 'text')[0].text for b in within(v3, 'g', 'band')} == {'+Inf', '-Inf'}
    # series-1 is layer4: all NaN at iteration 2 -> NaN markers, never a point at 0.
    v4 = tree.chart('series-1-values')
    nans = within(v4, 'path', 'nan')
    assert sorted(m.attrs['data-series'] for m in nans) == ['max', 'min']
    assert all('iteration 2' in m.title() and m.attrs['data-kernel'] == k4
               for m in nans)
    for p in within(v4, 'circle', 'point'):
        assert 'iteration 2' not in p.title()
    assert len(within(v4, 'circle', 'point')) == 4  # max, min at iterations 0, 1
    assert within(v4, 'text', 'x-label')[0].title().split('\n')[0] == k4
    # Along the order, iteration 1 (the first hit): the +-Inf markers sit on layer3 only.
    order = tree.chart('order-0-values')
    assert {m.attrs['data-kernel'] for m in within(order, cls='nonfinite')} == {k3}


def test_one_iteration(scratch):
    net = d.simple_net(n=8)
    dump = os.path.join(scratch, 'one')
    d.write_dump(dump, {0: net})
    out, page = report(scratch, dump, '--check', 'nan')
    assert 'holds one iteration' in page
    tree = render(scratch, out, height=1400)
    assert len(tree.find('svg', cls='plot')) == 2
    values = tree.chart('order-0-values')
    for series in ('max', 'min', 'mean'):
        drawn = [p.attrs['data-kernel'] for p in within(values, 'circle', 'point',
                                                        data_series=series)]
        assert drawn == [k['full_name'] for k in net]
    # Values as numpy sees them: the max point's hover text holds the kernel's max.
    first = within(values, 'circle', 'point', data_series='max')[0]
    shown = float(re.search(r'max = (\S+)', first.title()).group(1))
    assert round(abs(shown / net[0]['outputs'][0].astype(np.float64).max() - 1), 5) == 0
    assert_axis_names(values, [k['full_name'] for k in net])
    assert tree.find(cls='nonfinite') == []
    assert tree.find(cls='first-divergence') == []


def test_screenshot_reads(scratch):
    """Keeps a screenshot where GRAPHDUMP_REPORT_SHOT names a directory (to look at)."""
    net = d.simple_net(n=8)
    bad = copy.deepcopy(net)
    for i in range(5, 8):
        bad[i]['outputs'] = [net[i]['outputs'][0] * 1.5]
    bad[6]['outputs'][0][0, 0] = np.nan
    a, b = os.path.join(scratch, 'a'), os.path.join(scratch, 'b')
    d.write_dump(a, {0: bad, 1: bad, 2: bad})
    d.write_dump(b, {0: net, 1: net, 2: net})
    out, _ = report(scratch, '--compare', a, b)
    render(scratch, out, height=3000)
    keep = os.environ.get('GRAPHDUMP_REPORT_SHOT')
    if keep:
        shutil.copy(out + '.png', os.path.join(keep, 'report_compare.png'))
        shutil.copy(out, os.path.join(keep, 'report_compare.html'))


def test_hostile_kernel_names(scratch):
    """Names are data: markup in a kernel's name is shown as text, never run or parsed."""
    net = d.simple_net(n=4)
    evil = 'Default/net-Net/x</script><img src=x onerror=alert(1)>&amp;"q"-Mul-op9'
    net[2]['full_name'] = evil
    net[2]['op_type'] = 'Mul'
    net[2]['outputs'][0][0, 0] = np.inf
    dump = os.path.join(scratch, 'evil')
    d.write_dump(dump, {0: net})
    out, page = report(scratch, dump)
    tree = render(scratch, out, height=1400)
    assert tree.find('img') == []
    marks = tree.find('path', cls='pos-inf')
    assert marks
    assert {m.attrs['data-kernel'] for m in marks} == {evil}
    assert marks[0].title().startswith(evil)


def test_usage(scratch):
    dump = os.path.join(scratch, 'u')
    d.write_dump(dump, {0: d.simple_net()})
    assert d.graphdump('report', '-o', 'x.html').returncode == 2
    assert d.graphdump('report', dump).returncode == 2
    p = d.graphdump('report', dump, '--threads', '-1', '-o', os.path.join(scratch, 'x.html'))
    assert p.returncode == 2
    assert '--threads' in p.stderr
    assert not os.path.exists(os.path.join(scratch, 'x.html'))
