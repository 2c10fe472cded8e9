# generates the report, slowly
sleep 1; echo report
