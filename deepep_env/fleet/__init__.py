"""Fleet preflight (issue 28): the doctor reports of N nodes merged into one (:mod:`report`), and a
page an operator can look at (:mod:`html`)."""
