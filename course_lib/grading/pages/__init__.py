"""What ``course grade`` writes: :mod:`gradebook` (the CSV, inert to spreadsheets, and the
summary), :mod:`feedback` (pages with the gradebook's status in each test cell, MathJax served
beside them, the template in ``templates/``) and :mod:`inert` (student outputs and markdown made
inert)."""
