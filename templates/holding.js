// The holding page's live updates. Without this script the page still works: the Refresh header
// reloads it with the same figures. With it, the page stops that reload and instead polls the
// status JSON (which also renews the cookie), updates the figures in place without losing the
// scroll position, counts down to the next update, and goes to the site by itself when admitted.
(function () {
  'use strict';
  var data;
  try {
    data = JSON.parse(document.getElementById('wr-live').textContent);
  } catch (e) {
    return;
  }
  if (data.pow) return prove(data.pow);
  if (data.hook) return check(data.hook);
  // The event is over: nothing will change, so nothing is asked again (the page promises no update).
  if (document.body.getAttribute('data-state') === 'over') return;
  var every = Math.max(1, data.refresh) * 1000;
  var next = Date.now() + every;
  var timer;
  var nextEl = document.querySelector('.next');
  var updatedEl = document.querySelector('[data-text="updated"]');
  var progress = document.getElementById('progress');
  var texts = data.texts;

  function pad(n) {
    return (n < 10 ? '0' : '') + n;
  }
  function localClock() {
    var d = new Date();
    return pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  }
  function setText(name, value) {
    var nodes = document.querySelectorAll('[data-text="' + name + '"]');
    for (var i = 0; i < nodes.length; i++) if (nodes[i].textContent !== value) nodes[i].textContent = value;
  }
  // The tab's title as the edge writes it (pages.ts, documentTitle): the place first, then the site.
  function title(first) {
    var site = data.site || '';
    document.title = site === '' || site === first ? first : first + ' · ' + site;
  }
  // The language's own digits (Arabic), where they are not 0-9.
  function digits(s) {
    var d = texts.nextUpdate.digits;
    return d ? String(s).replace(/[0-9]/g, function (c) { return d.charAt(+c); }) : String(s);
  }
  // CLDR plural rules for whole numbers, as i18n.ts's PLURAL_RULES names them.
  function category(rule, n) {
    var t = n % 10, h = n % 100;
    if (rule === 'fr') return n < 2 ? 'one' : 'other';
    if (rule === 'ja') return 'other';
    if (rule === 'ar') return n === 0 ? 'zero' : n === 1 ? 'one' : n === 2 ? 'two' : h >= 3 && h <= 10 ? 'few' : h >= 11 ? 'many' : 'other';
    if (rule === 'he') return n === 1 ? 'one' : n === 2 ? 'two' : 'other';
    if (rule === 'pl') return n === 1 ? 'one' : t >= 2 && t <= 4 && (h < 12 || h > 14) ? 'few' : 'many';
    if (rule === 'ru') return t === 1 && h !== 11 ? 'one' : t >= 2 && t <= 4 && (h < 12 || h > 14) ? 'few' : 'many';
    return n === 1 ? 'one' : 'other';
  }
  function render(t) {
    texts = t;
    ['heading', 'placeLabel', 'place', 'detail', 'estimate', 'note', 'away', 'ticket'].forEach(function (k) {
      setText(k, t[k] || '');
    });
    if (t.title) title(t.title);
    if (progress) {
      progress.parentNode.hidden = t.progress === null;
      if (t.progress !== null) {
        progress.value = t.progress;
        progress.textContent = t.progress + '%';
      }
    }
    updatedEl.textContent = t.updatedPattern.replace('{clock}', digits(localClock()));
    if (t.opensAt) setText('placeLabel', t.opensAt.pattern.replace('{hm}', digits(hoursMinutes(new Date(t.opensAt.atMs)))).replace('{zone}', zoneOf(new Date(t.opensAt.atMs))));
  }
  // The opening time in the browser's own time zone, named as the browser names it (else as an offset).
  function hoursMinutes(d) {
    return pad(d.getHours()) + ':' + pad(d.getMinutes());
  }
  function zoneOf(d) {
    try {
      var parts = new Intl.DateTimeFormat(document.documentElement.lang || undefined, { timeZoneName: 'short' }).formatToParts(d);
      for (var i = 0; i < parts.length; i++) if (parts[i].type === 'timeZoneName') return parts[i].value;
    } catch (e) {
      // No Intl: the offset below.
    }
    var offset = -d.getTimezoneOffset();
    return 'UTC' + (offset < 0 ? '-' : '+') + pad(Math.floor(Math.abs(offset) / 60)) + ':' + pad(Math.abs(offset) % 60);
  }
  function tick() {
    if (turn) return;
    var s = Math.max(0, Math.ceil((next - Date.now()) / 1000));
    var f = texts.nextUpdate.forms;
    var form = f['=' + s] || f[category(texts.nextUpdate.rule, s)] || f.other || '';
    nextEl.textContent = '· ' + form.replace('{n}', digits(s));
  }
  var turn = false;
  function go() {
    // The cookie is now an access token: the same address takes the visitor to the site. First the
    // tab's title and the page say so (a tab in the background shows its title), a moment long.
    turn = true;
    clearTimeout(timer);
    document.body.setAttribute('data-state', 'turn');
    ['placeLabel', 'estimate', 'note', 'away'].forEach(function (k) {
      setText(k, '');
    });
    setText('heading', texts.turnTitle);
    setText('place', '✓');
    setText('detail', texts.admitted);
    if (progress) progress.parentNode.hidden = true;
    nextEl.textContent = '';
    title(texts.turnTitle);
    // A tab in the background waits until it is looked at (a bounded while: the session must not
    // lapse unused), so its title is what tells the visitor; a tab in view goes after the signal.
    var left = false;
    function leave() {
      if (left) return;
      left = true;
      location.replace(location.href);
    }
    if (document.hidden) {
      document.addEventListener('visibilitychange', function () {
        if (!document.hidden) setTimeout(leave, 1200);
      });
      setTimeout(leave, Math.max(1, data.turnWait || 60) * 1000);
    } else {
      setTimeout(leave, 1200);
    }
  }
  function poll() {
    var request = new XMLHttpRequest();
    request.open('GET', data.status, true);
    request.setRequestHeader('accept', 'application/json');
    request.timeout = 10000;
    request.onload = function () {
      var body;
      try {
        body = JSON.parse(request.responseText);
      } catch (e) {
        return failed();
      }
      if (body.state === 'admitted') return go();
      // No ticket any more (the queue was reset, a draw forgot it): the page takes a new one.
      if (body.state === 'none') return location.replace(location.href);
      // The event ended while this visitor waited: the page that says so, which then asks nothing.
      if (body.state === 'over') return location.replace(location.href);
      if (body.state !== document.body.getAttribute('data-state')) document.body.setAttribute('data-state', body.state);
      if (body.texts) render(body.texts);
      schedule((body.refresh_seconds || data.refresh) * 1000);
    };
    request.onerror = request.ontimeout = failed;
    request.send();
  }
  function failed() {
    setText('estimate', texts.failed);
    schedule(every);
  }
  function schedule(ms) {
    next = Date.now() + ms;
    clearTimeout(timer);
    timer = setTimeout(poll, ms);
    tick();
  }
  // A refused VIP code is not sent again: the address bar (and every reload) drops it.
  if (data.clean && history.replaceState) history.replaceState(null, '', data.clean);
  addEventListener('load', function () {
    // Take over from the Refresh header: stopping the document cancels its pending reload.
    setTimeout(function () {
      window.stop();
      render(texts);
      schedule(every);
      setInterval(tick, 1000);
    }, 0);
  });
  // The proof of work before a ticket (src/core/proof-of-work.ts): find a counter c such that
  // SHA-256("<nonce>:<c>") begins with `difficulty` zero bits, send it back in the cookie, reload.
  // The message is under 56 bytes, so each try is one SHA-256 block, and only the digest's first
  // word matters (difficulty is at most 32 bits). Tries run in slices so the page stays responsive.
  function prove(pow) {
    var K = [
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
      0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
      0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
      0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
      0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
      0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
      0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
    ];
    var W = new Int32Array(64);
    var prefix = pow.nonce + ':';
    var shift = 32 - pow.difficulty;
    function firstWord(text) {
      var i, x, y, n = text.length;
      for (i = 0; i < 16; i++) W[i] = 0;
      for (i = 0; i < n; i++) W[i >> 2] |= text.charCodeAt(i) << (24 - (i & 3) * 8);
      W[n >> 2] |= 0x80 << (24 - (n & 3) * 8);
      W[15] = n * 8;
      for (i = 16; i < 64; i++) {
        x = W[i - 15];
        y = W[i - 2];
        W[i] = (W[i - 16] + (((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3)) + W[i - 7] +
          (((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10))) | 0;
      }
      var a = 0x6a09e667, b = 0xbb67ae85 | 0, c = 0x3c6ef372, d = 0xa54ff53a | 0;
      var e = 0x510e527f, f = 0x9b05688c | 0, g = 0x1f83d9ab, h = 0x5be0cd19;
      for (i = 0; i < 64; i++) {
        var t1 = (h + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))) + ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
        var t2 = ((((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
        h = g;
        g = f;
        f = e;
        e = (d + t1) | 0;
        d = c;
        c = b;
        b = a;
        a = (t1 + t2) | 0;
      }
      return (0x6a09e667 + a) | 0;
    }
    var counter = 0;
    var started = Date.now();
    function slice() {
      for (var end = counter + 20000; counter < end; counter++) {
        if (firstWord(prefix + counter) >>> shift === 0) return found();
      }
      setTimeout(slice, 0);
    }
    function found() {
      var secure = location.protocol === 'https:' ? '; secure' : '';
      document.cookie = pow.cookie + '=' + pow.challenge + '~' + counter + '; path=/; max-age=120; samesite=lax' + secure;
      try {
        // How long the work took, for whoever measures it (the browser test does).
        sessionStorage.setItem('wr-pow-ms', String(Date.now() - started));
      } catch (e) {
        // Storage may be off; the solution stands without it.
      }
      location.replace(location.href);
    }
    addEventListener('load', function () {
      // Take over from the Refresh header, say what happens (the page says without JavaScript that
      // it needs it), then solve.
      setTimeout(function () {
        window.stop();
        var note = document.querySelector('[data-text="note"]');
        if (note && data.texts && data.texts.note) note.textContent = data.texts.note;
        slice();
      }, 0);
    });
  }
  // The challenge hook (src/core/challenge.ts): the provider's widget, rendered by its own script
  // into an element of its class; the token it hands our callback goes back in the cookie, then
  // the page reloads for its ticket. The widget's token lives five minutes, as does the cookie.
  function check(hook) {
    window.wrChallengeDone = function (token) {
      var secure = location.protocol === 'https:' ? '; secure' : '';
      document.cookie = hook.cookie + '=' + token + '; path=/; max-age=300; samesite=lax' + secure;
      location.replace(location.href);
    };
    addEventListener('load', function () {
      setTimeout(function () {
        window.stop();
        var note = document.querySelector('[data-text="note"]');
        if (note) note.textContent = hook.prompt;
        var widget = document.createElement('div');
        widget.className = hook.widget + ' challenge';
        widget.setAttribute('data-sitekey', hook.siteKey);
        widget.setAttribute('data-callback', 'wrChallengeDone');
        if (note && note.parentNode) note.parentNode.insertBefore(widget, note.nextSibling);
        else document.body.appendChild(widget);
        var script = document.createElement('script');
        script.src = hook.script;
        script.async = true;
        document.head.appendChild(script);
      }, 0);
    });
  }
})();
