// Waiting room session script, for the origin's pages: <script src="/__wr/assets/session.js" defer></script>
// While the tab is open it tells the waiting room the visitor is still here; when the page is hidden
// for good it gives the visitor's place back (after a short grace, since following a link also hides
// the page, and the next page's first heartbeat keeps the place).
(function () {
  var script = document.currentScript;
  var prefix = (script && script.getAttribute('data-prefix')) || '/__wr/';
  var every = Number((script && script.getAttribute('data-interval')) || 30) * 1000;
  var key = 'waiting-room-left';
  function beat() {
    try {
      fetch(prefix + 'heartbeat', { method: 'POST', credentials: 'same-origin', keepalive: true }).catch(function () {});
    } catch (e) {}
  }
  try {
    if (sessionStorage.getItem(key)) {
      sessionStorage.removeItem(key);
      beat();
    }
  } catch (e) {}
  setInterval(beat, every);
  addEventListener('pagehide', function () {
    try {
      sessionStorage.setItem(key, String(Date.now()));
    } catch (e) {}
    if (navigator.sendBeacon) navigator.sendBeacon(prefix + 'leave');
  });
})();
