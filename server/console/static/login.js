// a2c console: the login page. The server sends a wrong token back to
// the login form with ?error=token (see server/console); this says so.
'use strict';

(() => {
  function show() {
    const box = document.getElementById('login-error');
    // the server sends a failed login back to /?error=token (or limited,
    // invalid)
    const q = new URLSearchParams(location.search);
    const why = q.get('error') || q.get('login');
    const says = {
      token: 'That token is not right. Check it and try again.',
      failed: 'That token is not right. Check it and try again.',
      limited: 'Too many failed sign-ins from here. Wait a minute and try again.',
      invalid: 'The sign-in form was not understood. Try again.',
    };
    const token = document.getElementById('token');
    if (why) {
      box.textContent = says[why] || 'Sign-in failed. Try again.';
      token.setAttribute('aria-invalid', 'true');
      token.setAttribute('aria-describedby', 'login-error');
      history.replaceState(null, '', '/');
    }
    const form = document.getElementById('login');
    form.addEventListener('submit', (e) => {
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
