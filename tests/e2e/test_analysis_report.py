"""graphdump report: one self-contained HTML page; opened in headless Chromium, which takes a
screenshot and dumps the DOM, where the plots and the first-divergence marker must exist."""
import copy
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

import analysis_dumps as d


def chromium():
    for name in ('chromium', 'chromium-browser', 'google-chrome'):
        path = shutil.which(name)
        if path:
            return path
    return None


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        net = d.simple_net(n=8)
        bad = copy.deepcopy(net)
        for i in range(5, 8):
            bad[i]['outputs'] = [net[i]['outputs'][0] * 1.5]
        nan = bad[6]['outputs'][0].copy()
        nan[0, 0] = np.nan
        bad[6]['outputs'] = [nan]
        self.a = os.path.join(self.root, 'a')
        self.b = os.path.join(self.root, 'b')
        d.write_dump(self.a, {0: bad, 1: bad, 2: bad})
        d.write_dump(self.b, {0: net, 1: net, 2: net})
        self.net = net

    def tearDown(self):
        self.tmp.cleanup()

    def render(self, html):
        browser = chromium()
        if browser is None:
            if os.environ.get('GRAPHDUMP_SKIP_BROWSER') == '1':
                self.skipTest('no chromium')
            self.fail('chromium is not installed (scripts/install-deps installs it); set '
                      'GRAPHDUMP_SKIP_BROWSER=1 to skip')
        profile = os.path.join(self.root, 'profile')
        shot = os.path.join(self.root, 'shot.png')
        flags = [browser, '--headless', '--no-sandbox', '--disable-gpu',
                 '--disable-background-networking', '--disable-component-update',
                 '--no-first-run', '--user-data-dir=' + profile]
        url = 'file://' + html
        subprocess.run(flags + ['--screenshot=' + shot, '--window-size=1000,2000', url],
                       capture_output=True, timeout=120)
        self.assertTrue(os.path.exists(shot), 'no screenshot')
        with open(shot, 'rb') as f:
            self.assertEqual(f.read(8), b'\x89PNG\r\n\x1a\n')
        self.assertGreater(os.path.getsize(shot), 5000)
        dom = subprocess.run(flags + ['--dump-dom', url], capture_output=True, text=True,
                             timeout=120)
        self.assertEqual(dom.returncode, 0, dom.stderr[-2000:])
        return dom.stdout

    def test_compare_report(self):
        out = os.path.join(self.root, 'compare.html')
        p = d.graphdump('report', '--compare', self.a, self.b, '-o', out)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(out) as f:
            html = f.read()
        self.assertNotRegex(html, r'(src|href)=["\']?(https?:)?//')  # self-contained
        self.assertNotIn('<script', html)
        dom = self.render(out)
        self.assertGreaterEqual(len(re.findall(r'<svg[^>]*class="plot"', dom)), 3)
        self.assertRegex(dom, r'<g id="first-divergence" class="first-divergence">')
        self.assertIn(self.net[5]['full_name'], dom)
        self.assertGreater(len(re.findall(r'<polyline', dom)), 3)
        self.assertIn('id="watch-hits"', dom)
        self.assertIn('[nan]' if False else 'nan', dom)

    def test_single_dump_report(self):
        out = os.path.join(self.root, 'dump.html')
        p = d.graphdump('report', self.a, '-o', out, '--kernels', 'layer6', '--check', 'nan')
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        dom = self.render(out)
        self.assertNotIn('first-divergence', dom)
        self.assertIn('Statistics across iterations', dom)
        self.assertEqual(len(re.findall(r'<svg[^>]*class="plot"', dom)), 1)
        self.assertIn('class="first-hit"', dom)
        self.assertIn(self.net[6]['full_name'], dom)

    def test_usage(self):
        self.assertEqual(d.graphdump('report', '-o', 'x.html').returncode, 2)
        self.assertEqual(d.graphdump('report', self.a).returncode, 2)


if __name__ == '__main__':
    unittest.main()
