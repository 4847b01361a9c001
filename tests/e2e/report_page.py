"""A report page as a browser draws it, for the report tests: headless Chromium's DOM dump
parsed into a small tree (Dom, Element, within) and a screenshot's size (png_size)."""
import html
import html.parser
import os
import re
import shutil
import struct
import subprocess
import tempfile

import pytest


def chromium():
    for name in ('chromium', 'chromium-browser', 'google-chrome'):
        path = shutil.which(name)
        if path:
            return path
    return None


class Element:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent = tag, dict(attrs), parent
        self.children, self.text = [], ''

    def classes(self):
        return (self.attrs.get('class') or '').split()

    def title(self):
        """The text of the element's own <title> child (the hover text), or ''."""
        for c in self.children:
            if c.tag == 'title':
                return c.text
        return ''

    def iter(self):
        yield self
        for c in self.children:
            yield from c.iter()

    def ancestors(self):
        p = self.parent
        while p is not None:
            yield p
            p = p.parent


class Dom(html.parser.HTMLParser):
    """The dumped DOM as a tree of Elements (the serializer closes every non-void element)."""
    VOID = {'meta', 'br', 'img', 'input', 'link', 'hr', 'col', 'area', 'base', 'source', 'wbr'}

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.root = Element('#root', [], None)
        self.stack = [self.root]
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        e = Element(tag, attrs, self.stack[-1])
        self.stack[-1].children.append(e)
        if tag not in self.VOID:
            self.stack.append(e)

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1].text += data

    def find(self, tag=None, cls=None, **attrs):
        return within(self.root, tag, cls, **attrs)

    def chart(self, chart_id):
        """The <svg class="plot"> drawn into <div id="chart-{chart_id}">."""
        host = self.find('div', id='chart-' + chart_id)
        assert len(host) == 1, 'no chart ' + chart_id
        svgs = [e for e in host[0].iter() if e.tag == 'svg' and 'plot' in e.classes()]
        assert len(svgs) == 1, 'chart %s not drawn' % chart_id
        return svgs[0]


def within(root, tag=None, cls=None, **attrs):
    out = []
    for e in root.iter():
        if tag and e.tag != tag:
            continue
        if cls and cls not in e.classes():
            continue
        if any(e.attrs.get(k.replace('_', '-')) != v for k, v in attrs.items()):
            continue
        out.append(e)
    return out


def series_kernels(tree):
    """The kernels the across-iterations charts show, in page order."""
    return [html.unescape(k) for k in re.findall(r'<h3><code>(.*?)</code> output 0</h3>',
                                                  tree.text)]


def png_size(path):
    with open(path, 'rb') as f:
        head = f.read(24)
    assert head[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG: %r' % head[:8]
    return struct.unpack('>II', head[16:24])


def _chromium(browser, scratch, args):
    """Runs headless Chromium once with `args`, in a profile of its own under scratch: a
    profile in use by a Chromium still exiting would make this one hand its work to that one
    and exit without a screenshot or DOM. Returns the CompletedProcess (text output)."""
    profile = tempfile.mkdtemp(prefix='chromium_', dir=scratch)
    # No network at all: a fetch the page tried would fail and leave charts undrawn. The
    # page's script draws synchronously on load; the virtual time budget only runs while the
    # page is idle, so a slow (loaded) machine does not cut it short.
    flags = [browser, '--headless', '--no-sandbox', '--disable-gpu',
             '--disable-background-networking', '--disable-component-update',
             '--no-first-run', '--user-data-dir=' + profile,
             '--host-resolver-rules=MAP * ~NOTFOUND', '--virtual-time-budget=5000']
    try:
        return subprocess.run(flags + args, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors='replace') if isinstance(e.stderr, bytes) else e.stderr
        pytest.fail('chromium %s ran past %ds, stderr:\n%s' % (args[0], e.timeout,
                                                               (err or '')[-4000:]))


def render(scratch, html_path, height=2400):
    """Opens the page in headless Chromium (profile under scratch): checks the screenshot and
    that the script drew every chart before the tables; returns the drawn DOM (a Dom)."""
    browser = chromium()
    if browser is None:
        if os.environ.get('GRAPHDUMP_SKIP_BROWSER') == '1':
            pytest.skip('no chromium')
        pytest.fail('chromium is not installed (scripts/install-deps installs it); set '
                    'GRAPHDUMP_SKIP_BROWSER=1 to skip')
    shot = html_path + '.png'
    url = 'file://' + html_path
    p = _chromium(browser, scratch, ['--screenshot=' + shot, '--window-size=1000,%d' % height, url])
    why = 'chromium --screenshot exited %d, stderr:\n%s' % (p.returncode, p.stderr[-4000:])
    assert os.path.exists(shot), 'no screenshot: ' + why
    assert png_size(shot) == (1000, height), why
    assert os.path.getsize(shot) > 30000, 'a blank page: ' + why  # drawn charts
    dom = _chromium(browser, scratch, ['--dump-dom', url])
    why = 'chromium --dump-dom exited %d, stderr:\n%s' % (dom.returncode, dom.stderr[-4000:])
    assert dom.returncode == 0, why
    tree = Dom(dom.stdout)
    tree.text = dom.stdout
    body = tree.find('body')[0]
    assert body.attrs.get('data-charts-drawn') is not None, 'the script did not run: ' + why
    assert int(body.attrs['data-charts-drawn']) == len(tree.find('div', cls='chart')), why
    # Charts first, then the tables, each in a <details> (collapsed until opened).
    text = dom.stdout
    assert text.index('class="plot"') < text.index('<details')
    for table in tree.find('table'):
        assert 'details' in [a.tag for a in table.ancestors()]
    return tree
