import java.sql.*;
import java.util.ArrayList;
import java.util.List;

/**
 * Calls the DatabaseMetaData methods DBeaver and Metabase use against dpsql serve and prints one
 * line per call: "ok NAME ROWS first-values" or "error NAME SQLSTATE message".
 */
public class JdbcMetaProbe {
    interface Call {
        ResultSet run(DatabaseMetaData md) throws SQLException;
    }

    static void report(DatabaseMetaData md, String name, int shown, Call call) {
        try (ResultSet rs = call.run(md)) {
            int rows = 0;
            List<String> first = new ArrayList<>();
            while (rs.next()) {
                if (rows < 3) {
                    StringBuilder row = new StringBuilder();
                    for (int i = 1; i <= shown; i++) row.append(i > 1 ? "/" : "").append(rs.getString(i));
                    first.add(row.toString());
                }
                rows++;
            }
            System.out.println("ok " + name + " " + rows + " " + String.join(",", first));
        } catch (SQLException e) {
            System.out.println("error " + name + " " + e.getSQLState() + " " + e.getMessage().replace('\n', ' '));
        }
    }

    public static void main(String[] args) throws Exception {
        String url = args[0];
        String user = args.length > 1 ? args[1] : "jdbc";
        String password = args.length > 2 ? args[2] : "";
        try (Connection c = DriverManager.getConnection(url, user, password)) {
            DatabaseMetaData md = c.getMetaData();
            System.out.println("product " + md.getDatabaseProductName() + " " + md.getDatabaseProductVersion());
            report(md, "getCatalogs", 1, m -> m.getCatalogs());
            report(md, "getSchemas", 1, m -> m.getSchemas());
            report(md, "getSchemasPattern", 1, m -> m.getSchemas(null, "pub%"));
            report(md, "getTableTypes", 1, m -> m.getTableTypes());
            report(md, "getTables", 3, m -> m.getTables(null, "public", "%", null));
            report(md, "getViews", 3, m -> m.getTables(null, "public", "%", new String[] {"VIEW"}));
            report(md, "getColumns", 6, m -> m.getColumns(null, "public", "adult", "%"));
            report(md, "getPrimaryKeys", 4, m -> m.getPrimaryKeys(null, "public", "adult"));
            report(md, "getImportedKeys", 4, m -> m.getImportedKeys(null, "public", "adult"));
            report(md, "getExportedKeys", 4, m -> m.getExportedKeys(null, "public", "adult"));
            report(md, "getCrossReference", 4,
                   m -> m.getCrossReference(null, "public", "adult", null, "public", "education_levels"));
            report(md, "getIndexInfo", 6, m -> m.getIndexInfo(null, "public", "adult", false, true));
            report(md, "getTypeInfo", 2, m -> m.getTypeInfo());
            report(md, "getProcedures", 3, m -> m.getProcedures(null, "public", "%"));
            report(md, "getProcedureColumns", 4, m -> m.getProcedureColumns(null, "public", "%", "%"));
            report(md, "getFunctions", 3, m -> m.getFunctions(null, "public", "%"));
            report(md, "getFunctionColumns", 4, m -> m.getFunctionColumns(null, "public", "%", "%"));
            report(md, "getUDTs", 3, m -> m.getUDTs(null, "public", "%", null));
            report(md, "getTablePrivileges", 3, m -> m.getTablePrivileges(null, "public", "adult"));
            report(md, "getColumnPrivileges", 3, m -> m.getColumnPrivileges(null, "public", "adult", "%"));
            report(md, "getBestRowIdentifier", 2,
                   m -> m.getBestRowIdentifier(null, "public", "adult", DatabaseMetaData.bestRowSession, true));
            report(md, "getVersionColumns", 2, m -> m.getVersionColumns(null, "public", "adult"));
            report(md, "getClientInfoProperties", 1, m -> m.getClientInfoProperties());
            try {
                System.out.println("ok keywords " + md.getSQLKeywords().length());
            } catch (SQLException e) {
                System.out.println("error keywords " + e.getSQLState() + " " + e.getMessage().replace('\n', ' '));
            }
        }
    }
}
