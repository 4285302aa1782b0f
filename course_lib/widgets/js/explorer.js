// The attention explorer: rows are queries, columns are keys. Pointing at (or focusing) a query
// token highlights its row of weights over the keys, shown as a strip of key tokens (or over the
// image, for a grid of image regions). Drawn by anywidget in the lab and by the site's script
// from the saved data; the same code in both.

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) { node.className = className; }
  if (text !== undefined) { node.textContent = text; }
  return node;
}

function shade(weight) {  // white to dark blue; sqrt so that small weights stay visible
  const t = Math.sqrt(Math.max(0, Math.min(1, weight)));
  const channel = (from, to) => Math.round(from + (to - from) * t);
  return `rgb(${channel(255, 31)}, ${channel(255, 78)}, ${channel(255, 121)})`;
}

function ink(weight) { return Math.sqrt(weight) > 0.55 ? "#fff" : "#1a1a1a"; }

function selectorsOf(data) {
  return data.selectors.map((name) => ({
    name, values: [...new Set(data.views.map((view) => view.labels[name]))],
  }));
}

function render({ model, el }) {
  const data = model.get("data");
  const root = element("div", "course-explorer");
  root.setAttribute("data-course-widget", "attention-explorer");
  root.setAttribute("role", "group");
  root.setAttribute("aria-label", data.title);
  root.appendChild(element("p", "course-explorer-title", data.title));
  root.appendChild(element("p", "course-explorer-legend",
    `Rows are queries (${data.query_label}), columns are keys (${data.key_label}); each row ` +
    "sums to 1. Point at or tab to a query to see its row; arrow keys move between queries." +
    (data.views.some((v) => v.masked) ? " Hatched cells are masked keys (weight 0)." : "")));

  const state = {labels: {...data.views[0].labels}, active: 0};
  const controls = element("div", "course-explorer-controls");
  for (const {name, values} of selectorsOf(data)) {
    if (values.length < 2) { continue; }
    const label = element("label", "", name + " ");
    const select = element("select");
    select.setAttribute("data-explorer-selector", name);
    for (const value of values) { select.appendChild(element("option", "", value)); }
    select.value = state.labels[name];
    select.addEventListener("change", () => { state.labels[name] = select.value; draw(); });
    label.appendChild(select);
    controls.appendChild(label);
  }
  const numbers = element("label", "", " show numbers");
  const toggle = element("input");
  toggle.type = "checkbox";
  toggle.setAttribute("data-explorer-numbers", "");
  numbers.prepend(toggle);
  toggle.addEventListener("change", () => root.classList.toggle("with-numbers", toggle.checked));
  controls.appendChild(numbers);
  root.appendChild(controls);

  const focus = element("div", "course-explorer-focus");
  focus.setAttribute("aria-live", "polite");
  root.appendChild(focus);
  const body = element("div", "course-explorer-body");
  root.appendChild(body);
  el.appendChild(root);

  function currentView() {
    return data.views.find((view) => data.selectors.every(
      (name) => view.labels[name] === state.labels[name])) || data.views[0];
  }

  function keyCell(tag, weight, masked, index, text) {
    const cell = element(tag, "course-explorer-key", text);
    cell.setAttribute("data-key-index", String(index));
    cell.setAttribute("data-weight", masked ? "0" : String(weight));
    if (masked) { cell.setAttribute("data-masked", "true"); cell.classList.add("is-masked"); }
    else { cell.style.background = shade(weight); cell.style.color = ink(weight); }
    return cell;
  }

  function showFocus(view) {
    const t = state.active;
    const queries = view.queries, keys = view.keys;
    focus.innerHTML = "";
    const heading = element("p", "course-explorer-focus-title");
    heading.appendChild(element("span", "", "query "));
    heading.appendChild(element("strong", "", queries[t]));
    heading.appendChild(element("span", "", ` (row ${t}) over the keys:`));
    focus.appendChild(heading);
    const strip = element("div", "course-explorer-strip");
    strip.setAttribute("data-role", "active-row");
    strip.setAttribute("data-query-index", String(t));
    const row = view.weights[t];
    row.forEach((weight, k) => {
      const masked = Boolean(view.masked && view.masked[t][k]);
      const cell = keyCell("span", weight, masked, k, data.image ? "" : keys[k]);
      cell.title = `${queries[t]} → ${keys[k]}: ${masked ? "masked" : weight.toFixed(3)}`;
      cell.appendChild(element("small", "course-explorer-number",
        masked ? "–" : weight.toFixed(2)));
      strip.appendChild(cell);
    });
    if (data.image) {
      const frame = element("div", "course-explorer-image");
      const picture = element("img");
      picture.src = data.image.src;
      picture.alt = data.image.alt;
      frame.appendChild(picture);
      strip.classList.add("over-image");
      strip.style.gridTemplateColumns = `repeat(${data.image.cols}, 1fr)`;
      strip.style.gridTemplateRows = `repeat(${data.image.rows}, 1fr)`;
      const peak = Math.max(...row.filter((w, k) => !(view.masked && view.masked[t][k])), 1e-9);
      strip.querySelectorAll("[data-key-index]").forEach((cell) => {
        // yellow over the regions, in proportion to the row's largest weight
        const weight = Number(cell.getAttribute("data-weight"));
        cell.style.background = `rgba(255, 200, 0, ${(0.6 * weight / peak).toFixed(3)})`;
        cell.style.color = "#000";
      });
      frame.appendChild(strip);
      focus.appendChild(frame);
    } else {
      focus.appendChild(strip);
    }
  }

  function setActive(t) {
    state.active = t;
    body.querySelectorAll("tr[data-row]").forEach((tr) => {
      const on = Number(tr.getAttribute("data-row")) === t;
      tr.classList.toggle("is-active", on);
      tr.setAttribute("aria-selected", String(on));
    });
    showFocus(currentView());
  }

  function draw() {
    const view = currentView();
    body.innerHTML = "";
    const table = element("table", "course-explorer-grid");
    const caption = element("caption", "", "attention weights: rows are queries, columns keys");
    table.appendChild(caption);
    const head = element("tr");
    head.appendChild(element("th", "course-explorer-corner", "query ↓ key →"));
    view.keys.forEach((key) => {
      const th = element("th", "course-explorer-keyhead", key);
      th.scope = "col";
      head.appendChild(th);
    });
    table.appendChild(head);
    view.weights.forEach((row, t) => {
      const tr = element("tr");
      tr.setAttribute("data-row", String(t));
      const th = element("th");
      th.scope = "row";
      const query = element("button", "course-explorer-query", view.queries[t]);
      query.type = "button";
      query.setAttribute("data-query-index", String(t));
      query.addEventListener("mouseenter", () => setActive(t));
      query.addEventListener("focus", () => setActive(t));
      query.addEventListener("click", () => setActive(t));
      query.addEventListener("keydown", (event) => {
        const step = {ArrowDown: 1, ArrowUp: -1}[event.key];
        if (!step) { return; }
        event.preventDefault();
        const next = body.querySelector(`button[data-query-index="${t + step}"]`);
        if (next) { next.focus(); }
      });
      th.appendChild(query);
      tr.appendChild(th);
      row.forEach((weight, k) => {
        const masked = Boolean(view.masked && view.masked[t][k]);
        const cell = keyCell("td", weight, masked, k, "");
        cell.appendChild(element("span", "course-explorer-number",
          masked ? "–" : weight.toFixed(2)));
        tr.appendChild(cell);
      });
      table.appendChild(tr);
    });
    body.appendChild(table);
    setActive(Math.min(state.active, view.weights.length - 1));
  }

  draw();
}

export default { render };
