// The dashboard's script: paged, filterable, sortable tables from the JSON in the page, and a
// record of what each chart plotted (data-traces) where a test, or a person, can read it back.
window.addEventListener('error', function (e) {
  var box = document.getElementById('js-errors');
  box.textContent += (e.message || 'error') + '\n';
  box.style.display = 'block';
});

function esc(s) {
  return String(s).replace(/[&<>"']/g, function (c) {
    return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c];
  });
}

// Numbers to 3 significant digits, whole numbers from 100 on (as the console table does).
function fmt(v) {
  if (v === null || v === undefined || v === '') return '-';
  if (typeof v !== 'number') return String(v);
  if (Number.isInteger(v)) return String(v);
  var a = Math.abs(v);
  if (v === 0 || a >= 100) return v.toFixed(0);
  if (a < 1e-3) return v.toExponential(2);
  return v.toPrecision(3);
}

// An infinite number comes as the text 'inf' or '-inf' (JSON has none): sorted as the number.
function asNumber(v) {
  return v === 'inf' ? Infinity : v === '-inf' ? -Infinity : v;
}

function Grid(root) {
  var spec = JSON.parse(document.getElementById(root.dataset.src).textContent);
  var cols = spec.columns, all = spec.rows, size = spec.page_size;
  var texts = all.map(function (r) { return r.map(fmt).join(' ').toLowerCase(); });
  var state = {q: '', sort: -1, asc: true, page: 0, rows: all};
  root.innerHTML =
    '<div class="controls"><input type="search" placeholder="filter: words, or column=value">' +
    (spec.more ? '<label><input type="checkbox" class="toggle"> all columns</label>' : '') +
    '<button class="prev">&lsaquo;</button><span class="info"></span><button class="next">&rsaquo;</button></div>' +
    '<div class="scroll"><table><thead><tr>' +
    cols.map(function (c, i) {
      return '<th data-i="' + i + '" class="' + (c.main ? '' : 'more') + '">' + esc(c.label) + '</th>';
    }).join('') + '</tr></thead><tbody></tbody></table></div>';
  var input = root.querySelector('input[type=search]'), body = root.querySelector('tbody');
  if (all.length <= size && !spec.more) root.querySelector('.controls').style.display = 'none';

  function matches(i, terms) {
    return terms.every(function (t) {
      var eq = t.indexOf('=');
      if (eq > 0) {
        var k = t.slice(0, eq), want = t.slice(eq + 1);
        var c = cols.findIndex(function (c) { return c.key.toLowerCase() === k || c.label.toLowerCase() === k; });
        if (c >= 0) return fmt(all[i][c]).toLowerCase() === want || String(all[i][c]).toLowerCase() === want;
      }
      return texts[i].indexOf(t) >= 0;
    });
  }
  function cell(c, v) {
    var cls = (c.main ? '' : 'more') + (c.num ? ' n' : '');
    if (c.link) return '<td class="' + cls + '">' + (v ? '<a href="' + esc(v) + '">' + esc(c.key) + '</a>' : '') + '</td>';
    return '<td class="' + cls + '" title="' + esc(v === null ? '' : v) + '">' + esc(fmt(v)) + '</td>';
  }
  function render() {
    var pages = Math.max(1, Math.ceil(state.rows.length / size));
    state.page = Math.min(state.page, pages - 1);
    var shown = state.rows.slice(state.page * size, (state.page + 1) * size);
    var status = cols.findIndex(function (c) { return c.key === 'status'; });
    body.innerHTML = shown.map(function (r) {
      var bad = status >= 0 && r[status] !== 'ok' ? ' class="bad"' : '';
      return '<tr' + bad + '>' + r.map(function (v, i) { return cell(cols[i], v); }).join('') + '</tr>';
    }).join('');
    var from = state.rows.length ? state.page * size + 1 : 0;
    root.querySelector('.info').textContent = ' rows ' + from + '-' + (from + shown.length - (from ? 1 : 0)) +
      ' of ' + state.rows.length + (state.rows.length < all.length ? ' (filtered from ' + all.length + ')' : '') + ' ';
    root.dataset.total = all.length;
    root.dataset.matched = state.rows.length;
    root.dataset.shown = shown.length;
  }
  function update() {
    var terms = state.q.toLowerCase().split(/\s+/).filter(Boolean);
    state.rows = all.filter(function (r, i) { return matches(i, terms); });
    if (state.sort >= 0) {
      var i = state.sort, dir = state.asc ? 1 : -1;
      state.rows.sort(function (a, b) {
        var x = asNumber(a[i]), y = asNumber(b[i]);
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return dir * (typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y)));
      });
    }
    render();
  }
  input.addEventListener('input', function () {
    state.q = input.value; state.page = 0; update();
    if (root.dataset.hash) history.replaceState(null, '', '#' + root.dataset.hash + '=' + encodeURIComponent(state.q));
  });
  root.querySelector('thead').addEventListener('click', function (e) {
    var i = +e.target.dataset.i;
    state.asc = state.sort === i ? !state.asc : true; state.sort = i; update();
  });
  root.querySelector('.prev').onclick = function () { state.page = Math.max(0, state.page - 1); render(); };
  root.querySelector('.next').onclick = function () { state.page += 1; render(); };
  var toggle = root.querySelector('.toggle');
  if (toggle) toggle.onchange = function () { root.classList.toggle('all', toggle.checked); };
  // A link to the page can carry a filter: dashboard.html#filter=mode=default
  var m = root.dataset.hash && location.hash.match(new RegExp('^#' + root.dataset.hash + '=(.*)$'));
  if (m) { state.q = input.value = decodeURIComponent(m[1]); }
  update();
}

window.addEventListener('load', function () {
  document.querySelectorAll('.grid').forEach(Grid);
  document.querySelectorAll('.js-plotly-plot').forEach(function (gd) {
    gd.dataset.traces = JSON.stringify(gd.data.map(function (t) {
      return {name: t.name, type: t.type, x: Array.from(t.x || []), y: Array.from(t.y || [])};
    }));
  });
  document.body.dataset.plots = Array.from(document.querySelectorAll('.js-plotly-plot')).filter(function (gd) {
    return gd.querySelector('.main-svg');
  }).length;
  document.body.dataset.ready = 'true';
});
