"""Widgets that work in the lab and on the static site from one piece of JavaScript.

Each widget is an anywidget (``embed.EmbeddedWidget``): in JupyterLab its ES module draws it from
the data the kernel sends; its output also carries a ``text/html`` copy that holds the same data
as JSON, which the site draws with the same module and no kernel (``site_script``).
"""
