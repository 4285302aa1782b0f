// A control on the static site: the figure for every value the control takes was saved when
// the site was built, so moving the control shows the figure the lab would draw for it. (In the
// lab the same controls are ipywidgets, answered by the kernel; this module draws only the
// site's copy.)

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) { node.className = className; }
  if (text !== undefined) { node.textContent = text; }
  return node;
}

function render({ model, el }) {
  const data = model.get("data");
  const root = element("div", "course-control");
  const state = data.controls.map((control) => control.default);
  const inputs = element("div", "course-control-inputs");
  const output = element("div", "course-control-output");
  output.setAttribute("data-course-output", "");
  output.setAttribute("aria-live", "polite");

  function show() {
    const html = data.outputs[state.join(",")];
    output.innerHTML = html === undefined ? "<p>(no output saved for these values)</p>" : html;
    root.setAttribute("data-state", state.join(","));
  }

  data.controls.forEach((control, c) => {
    const label = element("label", "course-control-label");
    label.appendChild(element("span", "course-control-name", control.label + " "));
    let input;
    const value = element("output", "course-control-value", control.values[state[c]]);
    if (control.kind === "select") {
      input = element("select");
      control.values.forEach((text, i) => {
        const option = element("option", "", text);
        option.value = String(i);
        input.appendChild(option);
      });
      input.value = String(state[c]);
    } else if (control.kind === "checkbox") {
      input = element("input");
      input.type = "checkbox";
      input.checked = state[c] === 1;
    } else {
      input = element("input");
      input.type = "range";
      input.min = "0";
      input.max = String(control.values.length - 1);
      input.step = "1";
      input.value = String(state[c]);
      input.setAttribute("aria-valuetext", control.values[state[c]]);
    }
    input.setAttribute("data-course-control", control.name);
    input.addEventListener("input", () => {
      state[c] = control.kind === "checkbox" ? (input.checked ? 1 : 0) : Number(input.value);
      value.textContent = control.values[state[c]];
      if (control.kind === "range") { input.setAttribute("aria-valuetext", value.textContent); }
      show();
    });
    input.addEventListener("change", () => input.dispatchEvent(new Event("input")));
    label.appendChild(input);
    if (control.kind !== "select") { label.appendChild(value); }
    inputs.appendChild(label);
  });
  root.appendChild(inputs);
  root.appendChild(element("p", "course-control-note", data.note));
  root.appendChild(output);
  el.appendChild(root);
  show();
}

export default { render };
