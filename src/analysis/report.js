// Draws graphdump report's charts with d3 3.x (inlined before this script) from the JSON block
// script element "report-data", which src/analysis/report.cc writes: {"charts": [chart...]}, each
// chart {id, title, x_title, log_y, kernel_axis, width, height, x_count,
// points: [{x, name, label, detail}], series: [{name, color, values}],
// markers: [{index, class, id, label}]} and drawn into <div id="chart-{id}">. A value is a number,
// "NaN", "Inf", "-Inf" or null (no value). A point sits at position x of x_count: a downsampled
// chart holds some of the positions (the extremes of each pixel column, every column's first NaN
// and +-Inf, the marked points) and says so under the plot. "overview" is the rank-by-iteration
// grid {ranks, columns, cells: [[count or -1 per column] per rank], rank, what}, drawn into
// <div id="chart-overview"> and tied to <select id="rank-selector">.
//
// A finite value is a point (circle.point) on a line; NaN and +-Inf are never dropped and never
// drawn as a number: they are symbols (path.nonfinite.nan|pos-inf|neg-inf) in bands labelled
// "NaN" and "+Inf" above the plot and "-Inf" below it. On a log scale, values <= 0 go into a band
// "<= 0" below the plot. Every point, symbol and axis label carries data-kernel (the full name)
// and a <title> (the hover text).
(function () {
  'use strict';
  var BAND = {'NaN': 'nan', 'Inf': 'pos-inf', '-Inf': 'neg-inf'};
  var BAND_LABEL = {'nan': 'NaN', 'pos-inf': '+Inf', 'neg-inf': '-Inf', 'nonpos': '\u2264 0'};
  var SYMBOL = {'nan': 'diamond', 'pos-inf': 'triangle-up', 'neg-inf': 'triangle-down',
                'nonpos': 'square'};
  var BAND_HEIGHT = 16;
  var MAX_CIRCLES = 3000;  // per chart; beyond it lines alone carry the finite values
  // Six significant digits without trailing zeros ("2.5", "1.23457e-7"); NaN and Inf as named.
  function show(v) {
    return typeof v === 'string' ? v : String(Number(v.toPrecision(6)));
  }

  function translate(x, y) {
    return 'translate(' + x + ',' + y + ')';
  }

  // Where a value goes: 'finite', a band name, or null (nothing to draw).
  function placeOf(v, logY) {
    if (v === null || v === undefined) return null;
    if (typeof v === 'string') return BAND[v];
    return logY && v <= 0 ? 'nonpos' : 'finite';
  }

  function draw(chart) {
    var host = d3.select('#chart-' + chart.id);
    if (host.empty() || chart.points.length === 0) return;
    var n = chart.x_count || chart.points.length;
    function px(i) { return x(chart.points[i].x); }
    var used = {}, finite = [];
    chart.series.forEach(function (s) {
      s.values.forEach(function (v) {
        var place = placeOf(v, chart.log_y);
        if (place === 'finite') finite.push(v);
        else if (place) used[place] = true;
      });
    });
    var top = ['nan', 'pos-inf'].filter(function (b) { return used[b]; });
    var bottom = ['neg-inf', 'nonpos'].filter(function (b) { return used[b]; });
    var labelRoom = chart.kernel_axis ? 150 : 28;  // kernel labels: up to 32 characters, slanted
    var margin = {left: 72, right: 16, top: 22 + BAND_HEIGHT * top.length,
                  bottom: BAND_HEIGHT * bottom.length + labelRoom + 16};
    var plotW = chart.width - margin.left - margin.right, plotH = chart.height;
    var svg = host.append('svg')
        .attr('class', 'plot')
        .attr('width', chart.width)
        .attr('height', margin.top + plotH + margin.bottom)
        .attr('role', 'img')
        .attr('aria-label', chart.title);
    svg.append('title').text(chart.title);
    var g = svg.append('g').attr('transform', translate(margin.left, margin.top));

    var x = d3.scale.linear().domain([-0.5, n - 0.5]).range([0, plotW]);
    var lo = d3.min(finite), hi = d3.max(finite);
    if (lo === undefined) {
      lo = chart.log_y ? 1e-3 : 0;
      hi = 1;
    }
    if (chart.log_y) {
      if (hi / lo < 1.01) {
        lo /= 10;
        hi *= 10;
      }
    } else {
      // A span too small to draw (cosine 0.9999999999999998 and 1) is widened around its middle.
      var scale = Math.max(Math.abs(lo), Math.abs(hi));
      var least = scale > 0 ? scale * 1e-6 : 1;
      if (hi - lo < least) {
        var mid = (lo + hi) / 2;
        lo = mid - least;
        hi = mid + least;
      }
    }
    var y = (chart.log_y ? d3.scale.log() : d3.scale.linear()).domain([lo, hi]).range([plotH, 0]);
    if (!chart.log_y) y.nice();
    y.clamp(true);  // nothing finite leaves the plot area
    var bandY = {};
    top.forEach(function (b, i) { bandY[b] = -BAND_HEIGHT * (top.length - i) + BAND_HEIGHT / 2 - 4; });
    bottom.forEach(function (b, i) { bandY[b] = plotH + 4 + BAND_HEIGHT * i + BAND_HEIGHT / 2; });
    var axisY = plotH + 4 + BAND_HEIGHT * bottom.length;

    g.append('rect').attr('class', 'frame').attr('width', plotW).attr('height', plotH)
        .attr('fill', '#fafafa').attr('stroke', '#999');
    top.concat(bottom).forEach(function (b) {
      var band = g.append('g').attr('class', 'band band-' + b);
      band.append('rect').attr('x', 0).attr('y', bandY[b] - BAND_HEIGHT / 2).attr('width', plotW)
          .attr('height', BAND_HEIGHT - 2).attr('fill', b === 'nonpos' ? '#f2f2f2' : '#fdecec');
      band.append('text').attr('x', -6).attr('y', bandY[b] + 3).attr('text-anchor', 'end')
          .text(BAND_LABEL[b]);
    });

    var yAxis = d3.svg.axis().scale(y).orient('left').ticks(5);
    if (chart.log_y && hi / lo >= 10) {
      // Label the powers of ten only (d3 3.x gives a tick at every 1..9 of each decade).
      yAxis.tickFormat(function (d) {
        var e = Math.log(d) / Math.LN10;
        return Math.abs(e - Math.round(e)) < 1e-9 ? d3.format('.0e')(d) : '';
      });
    } else {
      yAxis.tickFormat(function (d) { return String(Number(d.toPrecision(7))); });
    }
    g.append('g').attr('class', 'y axis').call(yAxis)
        .selectAll('path,line').attr('fill', 'none').attr('stroke', '#999');

    // x axis: every label when they fit, else one per `room` pixels; the markers' kernels always.
    var room = chart.kernel_axis ? 15 : 28;
    var step = Math.max(1, Math.ceil(n * room / plotW));
    var ticks = {}, last = -Infinity;
    chart.points.forEach(function (p, i) {
      if (p.x - last >= step) {
        ticks[i] = true;
        last = p.x;
      }
    });
    chart.markers.forEach(function (m) {
      if (m['class'] === 'iteration-boundary') return;
      var at = chart.points[m.index].x;
      Object.keys(ticks).forEach(function (key) {
        if (Math.abs(chart.points[+key].x - at) < step) delete ticks[key];
      });
      ticks[m.index] = true;
    });
    var xAxis = g.append('g').attr('class', 'x axis').attr('transform', translate(0, axisY));
    Object.keys(ticks).forEach(function (key) {
      var idx = +key, p = chart.points[idx];
      var tick = xAxis.append('g').attr('class', 'tick').attr('transform', translate(px(idx), 0));
      tick.append('line').attr('y2', 4).attr('stroke', '#999');
      var label = tick.append('text').attr('class', 'x-label').attr('data-kernel', p.name);
      if (chart.kernel_axis) {
        label.attr('transform', 'rotate(-55)').attr('x', -6).attr('y', 6)
            .attr('text-anchor', 'end');
      } else {
        label.attr('y', 14).attr('text-anchor', 'middle');
      }
      label.text(p.label);
      label.append('title').text(p.name + (p.detail ? '\n' + p.detail : ''));
    });
    svg.append('text').attr('class', 'x-title')
        .attr('x', margin.left + plotW / 2).attr('y', margin.top + plotH + margin.bottom - 4)
        .attr('text-anchor', 'middle').text(chart.x_title);

    var mi = 0;  // labels of markers other than iteration boundaries, one line each
    chart.markers.forEach(function (m) {
      var p = chart.points[m.index];
      var mk = g.append('g').attr('class', 'marker ' + m['class']).attr('data-kernel', p.name);
      if (m.id) mk.attr('id', m.id);
      var boundary = m['class'] === 'iteration-boundary';
      var xm = boundary ? x(p.x - 0.5) : x(p.x);
      var color = boundary ? '#888' : m['class'] === 'first-divergence' ? '#d00'
          : m['class'] === 'adds-error' ? '#6a1b9a' : '#b05000';
      mk.append('line').attr('x1', xm).attr('x2', xm).attr('y1', -BAND_HEIGHT * top.length)
          .attr('y2', axisY).attr('stroke', color).attr('stroke-width', boundary ? 1 : 2)
          .attr('stroke-dasharray', '4 2');
      var right = boundary || p.x < n / 2;
      mk.append('text').attr('class', 'marker-label')
          .attr('x', xm + (right ? 4 : -4)).attr('y', boundary ? plotH - 4 : 12 + 13 * mi)
          .attr('text-anchor', right ? 'start' : 'end').attr('fill', color)
          .attr('font-size', 11).text(m.label);
      mk.append('title').text(m.label + ': ' + p.name + (p.detail ? '\n' + p.detail : ''));
      if (!boundary) ++mi;
    });

    var jitter = chart.series.length > 1 ? 3 : 0;
    chart.series.forEach(function (s, si) {
      var sg = g.append('g').attr('class', 'series').attr('data-series', s.name);
      var line = d3.svg.line()
          .defined(function (v) { return placeOf(v, chart.log_y) === 'finite'; })
          .x(function (v, i) { return px(i); })
          .y(function (v) { return y(v); });
      sg.append('path').attr('class', 'line').attr('d', line(s.values)).attr('fill', 'none')
          .attr('stroke', s.color).attr('stroke-width', 1.5);
      var drawCircles = chart.points.length <= MAX_CIRCLES;
      s.values.forEach(function (v, i) {
        var place = placeOf(v, chart.log_y);
        if (place === null || (place === 'finite' && !drawCircles)) return;
        var p = chart.points[i], mark;
        if (place === 'finite') {
          mark = sg.append('circle').attr('class', 'point').attr('cx', px(i)).attr('cy', y(v))
              .attr('r', n > 200 ? 2 : 3).attr('fill', s.color);
        } else {
          var dy = (si - (chart.series.length - 1) / 2) * jitter;
          mark = sg.append('path')
              .attr('class', place === 'nonpos' ? 'nonpositive' : 'nonfinite ' + place)
              .attr('d', d3.svg.symbol().type(SYMBOL[place]).size(n > 200 ? 30 : 48)())
              .attr('transform', translate(px(i), bandY[place] + dy))
              .attr('fill', s.color).attr('stroke', place === 'nonpos' ? '#666' : '#900')
              .attr('data-value', show(v));
        }
        mark.attr('data-kernel', p.name).attr('data-series', s.name);
        mark.append('title').text(p.name + '\n' + (p.detail ? p.detail + '\n' : '') + s.name +
                                  ' = ' + show(v));
      });
    });

    if (chart.points.length < n) {
      host.append('p').attr('class', 'downsampled').style('font-size', '11px')
          .style('margin', '0 0 0 72px').text('Downsampled: ' + chart.points.length + ' of ' + n +
          ' points drawn (per pixel column the lowest and highest values and the first NaN and ' +
          '\u00b1Inf of each series; marked points exactly where they are).');
    }

    var legend = svg.append('g').attr('class', 'legend').attr('transform', translate(margin.left, 12));
    var lx = 0;
    chart.series.forEach(function (s) {
      legend.append('rect').attr('x', lx).attr('y', -8).attr('width', 10).attr('height', 10)
          .attr('fill', s.color);
      legend.append('text').attr('x', lx + 14).attr('y', 1).attr('fill', s.color).text(s.name);
      lx += 24 + 7 * s.name.length;
    });
  }

  // The rank-by-iteration overview: one row per rank, one cell per iteration (or group of them),
  // red as deep as the log of the count of hits and failing kernels; a click selects the rank.
  function drawOverview(o, select, note) {
    var host = d3.select('#chart-overview');
    if (!o || host.empty()) return;
    var rows = o.ranks.length, cols = o.columns.length;
    var left = 72, top = 8, w = Math.max(2, Math.min(24, Math.floor(820 / cols)));
    var h = Math.max(1, Math.min(14, Math.floor(480 / rows)));
    var svg = host.append('svg').attr('class', 'overview').attr('width', left + cols * w + 16)
        .attr('height', top + rows * h + 40).attr('role', 'img')
        .attr('aria-label', o.what + ' by rank and iteration');
    svg.append('title').text(o.what + ' by rank (rows) and iteration (columns)');
    var most = 1;
    o.cells.forEach(function (row) { row.forEach(function (c) { most = Math.max(most, c); }); });
    var rowsByRank = {};
    o.cells.forEach(function (row, r) {
      var g = svg.append('g').attr('class', 'overview-row').attr('data-rank', o.ranks[r])
          .attr('transform', translate(left, top + r * h)).style('cursor', 'pointer')
          .on('click', function () { select.value = String(o.ranks[r]); update(); });
      rowsByRank[o.ranks[r]] = g;
      row.forEach(function (c, k) {
        var fill = c < 0 ? '#fff' : c === 0 ? '#e8f0e8'
            : d3.interpolateRgb('#f7c6c6', '#a00000')(Math.log(1 + c) / Math.log(1 + most));
        g.append('rect').attr('x', k * w).attr('width', w).attr('height', h).attr('fill', fill)
            .append('title').text('rank ' + o.ranks[r] + ', iteration ' + o.columns[k] + ': ' +
                                  (c < 0 ? 'not dumped' : c + ' ' + o.what));
      });
    });
    var labelEvery = Math.max(1, Math.ceil(12 / h));
    o.ranks.forEach(function (rank, r) {
      if (r % labelEvery) return;
      svg.append('text').attr('x', left - 4).attr('y', top + r * h + Math.min(h, 10))
          .attr('text-anchor', 'end').attr('font-size', 10).text('rank ' + rank);
    });
    var colEvery = Math.max(1, Math.ceil(40 / w));
    o.columns.forEach(function (label, k) {
      if (k % colEvery) return;
      svg.append('text').attr('x', left + k * w).attr('y', top + rows * h + 12)
          .attr('font-size', 10).text(label);
    });
    svg.append('text').attr('x', left).attr('y', top + rows * h + 30).attr('font-size', 11)
        .text('iteration \u2192 (cells: ' + o.what + '; white: not dumped)');
    var mark = svg.append('rect').attr('class', 'overview-selected').attr('fill', 'none')
        .attr('stroke', '#000').attr('stroke-width', 1.5).attr('x', left - 1)
        .attr('width', cols * w + 2).attr('height', h + 2);
    function update() {
      var rank = Number(select.value), r = o.ranks.indexOf(rank);
      mark.attr('y', top + r * h - 1);
      var option = select.options[select.selectedIndex];
      note.textContent = (rank === o.rank ? 'The charts below show this rank: '
          : 'The charts below show rank ' + o.rank + ' (graphdump report ... --rank ' + rank +
            ' charts this one). ') + option.text;
    }
    select.addEventListener('change', update);
    update();
  }

  var data = JSON.parse(document.getElementById('report-data').textContent);
  data.charts.forEach(draw);
  drawOverview(data.overview, document.getElementById('rank-selector'),
               document.getElementById('rank-note'));
  document.body.setAttribute('data-charts-drawn', String(data.charts.length));
})();
