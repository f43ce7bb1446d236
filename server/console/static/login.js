// a2c console: the login page. The server answers a wrong token with the
// login form again and an error (see server/console); this shows it.
'use strict';

(() => {
  function show() {
    const box = document.getElementById('login-error');
    const q = new URLSearchParams(location.search);
    const err = q.get('error');
    if (err) {
      box.textContent = err === '1' || err === 'token' || err === 'invalid'
        ? 'That token is not right. Check it and try again.'
        : err;
    }
    const form = document.getElementById('login');
    form.addEventListener('submit', (e) => {
      const token = document.getElementById('token');
      if (!token.value) {
        e.preventDefault();
        box.textContent = 'Enter the token.';
        token.focus();
      }
    });
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', show);
  else show();
})();
