() => {
  // Keyboard: Gradio's dropdown opens its list on focus and keeps it open when Tab moves focus on
  // (the list then covers the page). Close it, as Escape does, once focus has left the dropdown.
  if (window.__specdecDropdowns) return;
  window.__specdecDropdowns = true;
  document.addEventListener('focusout', (e) => {
    const input = e.target;
    if (!(input instanceof HTMLInputElement) || input.getAttribute('role') !== 'combobox') return;
    const block = input.closest('.block') || input.parentElement;
    if (e.relatedTarget && block && block.contains(e.relatedTarget)) return;
    setTimeout(() => {
      if (input.getAttribute('aria-expanded') === 'true' && document.activeElement !== input) {
        input.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape', bubbles: true}));
      }
    }, 0);
  });
}
