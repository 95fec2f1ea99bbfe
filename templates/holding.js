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
  function render(t) {
    texts = t;
    ['heading', 'placeLabel', 'place', 'detail', 'estimate', 'note', 'ticket'].forEach(function (k) {
      setText(k, t[k] || '');
    });
    if (progress) {
      progress.parentNode.hidden = t.progress === null;
      if (t.progress !== null) {
        progress.value = t.progress;
        progress.textContent = t.progress + '%';
      }
    }
    updatedEl.textContent = t.updatedPattern.replace('{clock}', localClock());
  }
  function tick() {
    var s = Math.max(0, Math.ceil((next - Date.now()) / 1000));
    var n = texts.nextUpdate;
    nextEl.textContent = '· ' + (n.oneFor.indexOf(s) >= 0 ? n.one : n.other).replace('{n}', String(s));
  }
  function go() {
    // The cookie is now an access token: the same address takes the visitor to the site.
    setText('detail', texts.admitted);
    location.replace(location.href);
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
      if (body.state === 'admitted' || body.state === 'none') return go();
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
  addEventListener('load', function () {
    // Take over from the Refresh header: stopping the document cancels its pending reload.
    setTimeout(function () {
      window.stop();
      render(texts);
      schedule(every);
      setInterval(tick, 1000);
    }, 0);
  });
})();
