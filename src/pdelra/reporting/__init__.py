"""The report's building blocks, display only (the numbers come from `pdelra.results` via the tables
folder): saving figures and tables with captions (`io`), labels, colours and number formats (`style`), what
several sections use to show things (`display`), and the report's sections, one module each with
`render(report)` (`sections`)."""
