// Self-check questions: instant feedback, an explanation for every option, options shuffled
// with a seed drawn per page load (?quiz-seed=N fixes it). Drawn by anywidget in the lab and by
// the site's script from the saved data; the same code in both.

function generator(seed) {  // mulberry32: a small seeded generator of numbers in [0, 1)
  let state = seed >>> 0;
  return function () {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function pageSeed() {
  const fixed = /[?&]quiz-seed=(\d+)/.exec(window.location.search);
  if (fixed) { return Number(fixed[1]); }
  if (window.courseQuizSeed === undefined) {
    window.courseQuizSeed = Math.floor(Math.random() * 2147483647);
  }
  return window.courseQuizSeed;
}

function hash(text) {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) { h = Math.imul(h ^ text.charCodeAt(i), 16777619); }
  return h >>> 0;
}

function shuffledOrder(count, random) {
  const order = Array.from({length: count}, (_, i) => i);
  for (let i = count - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

function element(tag, className, html) {
  const node = document.createElement(tag);
  if (className) { node.className = className; }
  if (html !== undefined) { node.innerHTML = html; }
  return node;
}

function showFeedback(feedback, right, html) {
  feedback.innerHTML = "";
  feedback.appendChild(element("strong", "", right ? "✓ Right. " : "✗ Not quite. "));
  feedback.appendChild(element("span", "", html));
  feedback.dataset.result = right ? "right" : "wrong";
  feedback.className = "course-quiz-feedback " + (right ? "is-right" : "is-wrong");
}

function choiceQuestion(question, root, feedback, random) {
  const list = element("div", "course-quiz-options");
  list.setAttribute("role", "group");
  list.setAttribute("aria-label", "answers");
  for (const index of shuffledOrder(question.options.length, random)) {
    const option = question.options[index];
    const button = element("button", "course-quiz-option", option.text);
    button.type = "button";
    button.setAttribute("data-option", String(index));
    button.setAttribute("aria-pressed", "false");
    button.addEventListener("click", () => {
      list.querySelectorAll("button").forEach((b) => b.setAttribute("aria-pressed", "false"));
      button.setAttribute("aria-pressed", "true");
      showFeedback(feedback, option.correct, option.why);
    });
    list.appendChild(button);
  }
  root.appendChild(list);
}

function numberQuestion(question, root, feedback) {
  const form = element("form", "course-quiz-number");
  const label = element("label", "", "Your answer ");
  const input = element("input");
  input.type = "text";
  input.inputMode = "decimal";
  input.setAttribute("data-option", "number");
  label.appendChild(input);
  const check = element("button", "course-quiz-check", "Check");
  check.type = "submit";
  form.appendChild(label);
  form.appendChild(check);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const value = Number(input.value.trim().replace(",", "."));
    if (input.value.trim() === "" || !Number.isFinite(value)) {
      feedback.textContent = "Type a number, then Check.";
      feedback.dataset.result = "invalid";
      return;
    }
    const close = (target) => Math.abs(value - target) <= question.tolerance + 1e-12;
    if (close(question.answer)) { showFeedback(feedback, true, question.right); return; }
    const mistake = question.mistakes.find((m) => close(m.value));
    showFeedback(feedback, false, mistake ? mistake.why : question.wrong);
  });
  root.appendChild(form);
}

function render({ model, el }) {
  const seed = pageSeed();
  el.classList.add("course-quiz-list");
  for (const question of model.get("data").questions) {
    const root = element("section", "course-quiz");
    root.setAttribute("data-course-quiz", question.id);
    root.setAttribute("aria-label", "Check your understanding");
    root.appendChild(element("p", "course-quiz-title", "Check your understanding"));
    root.appendChild(element("div", "course-quiz-prompt", question.prompt));
    const feedback = element("div", "course-quiz-feedback");
    feedback.setAttribute("data-feedback", "");
    feedback.setAttribute("role", "status");
    feedback.setAttribute("aria-live", "polite");
    if (question.kind === "choice") {
      choiceQuestion(question, root, feedback, generator(seed ^ hash(question.id)));
    } else {
      numberQuestion(question, root, feedback);
    }
    root.appendChild(feedback);
    el.appendChild(root);
  }
}

export default { render };
