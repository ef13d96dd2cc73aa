import java.sql.*;

/** Drives dpsql serve through the PostgreSQL JDBC driver; prints one line per check. */
public class JdbcProbe {
    public static void main(String[] args) throws Exception {
        String url = args[0];
        String user = args.length > 1 ? args[1] : "jdbc";
        String password = args.length > 2 ? args[2] : "";
        try (Connection c = DriverManager.getConnection(url, user, password)) {
            DatabaseMetaData md = c.getMetaData();
            try (ResultSet rs = md.getSchemas()) {
                while (rs.next()) System.out.println("schema " + rs.getString("TABLE_SCHEM"));
            }
            try (ResultSet rs = md.getTables(null, null, "%", new String[] {"TABLE"})) {
                while (rs.next()) System.out.println("table " + rs.getString("TABLE_SCHEM") + "." + rs.getString("TABLE_NAME"));
            }
            try (ResultSet rs = md.getColumns(null, "public", "adult", "%")) {
                while (rs.next()) System.out.println("column " + rs.getString("COLUMN_NAME") + " " + rs.getString("TYPE_NAME") + " " + rs.getInt("DATA_TYPE"));
            }
            try (Statement s = c.createStatement();
                 ResultSet rs = s.executeQuery("SELECT DP_COUNT(*) AS n FROM adult WITH (epsilon = 0.1)")) {
                rs.next();
                System.out.println("count " + rs.getLong("n") + " " + rs.getMetaData().getColumnTypeName(1));
            }
            try (Statement s = c.createStatement()) {
                s.executeQuery("SELECT * FROM adult");
                System.out.println("refused no");
            } catch (SQLException e) {
                System.out.println("refused " + e.getSQLState() + " " + e.getMessage().replace('\n', ' '));
            }
            try (PreparedStatement p = c.prepareStatement("SELECT DP_MEAN(age) AS m FROM adult WHERE age > ? WITH (epsilon = 0.1)")) {
                ResultSetMetaData rmd = p.getMetaData();
                System.out.println("metadata " + rmd.getColumnName(1) + " " + rmd.getColumnTypeName(1));
            }
            try (PreparedStatement p = c.prepareStatement("SELECT DP_MEAN(age) AS m FROM adult WHERE age > ? WITH (epsilon = 0.1)")) {
                for (int i = 0; i < 6; i++) {
                    p.setInt(1, 20 + i);
                    try (ResultSet rs = p.executeQuery()) {
                        rs.next();
                        System.out.println("prepared " + i + " " + rs.getDouble("m") + " " + rs.getMetaData().getColumnTypeName(1));
                    }
                }
            }
        }
    }
}
