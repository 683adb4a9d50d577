"""The reports' generated tables, one module per problem (course/tools/report_tables.py writes
them into the reports); style.py holds the formatting and the bands' helpers they share."""
